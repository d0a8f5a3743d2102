//! Frames on a TCP stream: a 4-byte big-endian length, then that many bytes of JSON.

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Frames above this are refused: a damaged length must not allocate gigabytes. Snapshot
/// chunks are far smaller (openraft's chunk size).
const MAX_FRAME: u32 = 256 << 20;

pub async fn write_frame(stream: &mut TcpStream, value: &impl Serialize) -> std::io::Result<()> {
    let body = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&l| l <= MAX_FRAME)
        .ok_or_else(|| {
            std::io::Error::other(format!("frame of {} bytes is too long", body.len()))
        })?;
    stream.write_all(&len.to_be_bytes()).await?;
    stream.write_all(&body).await?;
    stream.flush().await
}

/// The next frame; `None` when the peer closed the stream between frames.
pub async fn read_frame<T: DeserializeOwned>(stream: &mut TcpStream) -> std::io::Result<Option<T>> {
    let mut len = [0u8; 4];
    // A close before the first byte ends the stream; a close inside the frame is an error.
    if stream.read(&mut len[..1]).await? == 0 {
        return Ok(None);
    }
    stream.read_exact(&mut len[1..]).await?;
    let len = u32::from_be_bytes(len);
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {len} bytes is too long"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    stream.read_exact(&mut body).await?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}
