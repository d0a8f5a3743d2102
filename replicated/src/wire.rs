//! Frames on a stream (TCP, or TLS over it): a 4-byte big-endian length, then that many bytes
//! of JSON.

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest frame a node or client takes unless configured otherwise: far above a
/// snapshot chunk (1 MiB, about 3.5 MiB as JSON) or a batch of appended entries, and far
/// below what a damaged or hostile length could make a reader allocate.
pub const DEFAULT_MAX_FRAME: u32 = 64 << 20;

pub async fn write_frame<W: AsyncWrite + Unpin>(
    stream: &mut W,
    value: &impl Serialize,
    max: u32,
) -> std::io::Result<()> {
    let body = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&l| l <= max)
        .ok_or_else(|| {
            std::io::Error::other(format!(
                "frame of {} bytes is over the limit of {max}",
                body.len()
            ))
        })?;
    stream.write_all(&len.to_be_bytes()).await?;
    stream.write_all(&body).await?;
    stream.flush().await
}

/// The next frame; `None` when the peer closed the stream between frames. A frame longer
/// than `max` is refused on its length, before anything is allocated for it or read of it.
pub async fn read_frame<R: AsyncRead + Unpin, T: DeserializeOwned>(
    stream: &mut R,
    max: u32,
) -> std::io::Result<Option<T>> {
    let mut len = [0u8; 4];
    // A close before the first byte ends the stream; a close inside the frame is an error.
    if stream.read(&mut len[..1]).await? == 0 {
        return Ok(None);
    }
    stream.read_exact(&mut len[1..]).await?;
    let len = u32::from_be_bytes(len);
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {len} bytes is over the limit of {max}"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    stream.read_exact(&mut body).await?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_frame_over_the_limit_is_refused_on_its_length_alone() {
        let (mut writer, mut reader) = tokio::io::duplex(64);
        // Only the length is ever sent: a reader that waited for the body, or allocated
        // it, would not return.
        writer.write_all(&(1u32 << 30).to_be_bytes()).await.unwrap();
        let refused = read_frame::<_, String>(&mut reader, 1 << 20).await;
        let e = refused.expect_err("refused");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("over the limit"), "{e}");

        let (mut writer, mut reader) = tokio::io::duplex(1 << 16);
        write_frame(&mut writer, &"x".repeat(100), 1 << 20)
            .await
            .unwrap();
        let back: Option<String> = read_frame(&mut reader, 1 << 20).await.unwrap();
        assert_eq!(back.as_deref(), Some("x".repeat(100).as_str()));
        assert!(write_frame(&mut writer, &"x".repeat(100), 50)
            .await
            .is_err());
    }
}
