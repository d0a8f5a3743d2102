//! Memory and disk accounting for `kvtool bench`: what a report about a run needs besides its
//! memory limit (`cgroup.rs`).
//!
//! [`resident_bytes`] (the process's own memory), [`dir_bytes`] (how big the store is, to
//! compare with the limit), [`drop_page_cache`] (start cold) and [`parse_size`] (read
//! `--memory-limit 512MiB`).
//!
//! Linux only: `/proc` and `posix_fadvise` are Linux interfaces. Elsewhere the functions
//! return errors rather than failing to build.

use std::fs;
use std::io;
use std::path::Path;

/// Parses sizes such as "1GiB", "1G", "512MiB", "512M", "64k", "1073741824" (binary units:
/// K/KiB = 1024 etc.; case-insensitive; no fractional parts required). Errors name the input.
///
/// Memory limits are set in pages of a power-of-two size, so units are binary; "KB", "MB", ...
/// are read as binary too, as `docker --memory` and `systemd` read them, rather than rejected.
/// A trailing "B" alone means bytes, and a space may separate number and unit.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(digits_end);
    if digits.is_empty() {
        return Err(format!(
            "invalid size {text:?}: expected a number of bytes, optionally followed by a unit \
             such as K, M, G (e.g. \"512MiB\")"
        ));
    }
    if unit.starts_with('.') {
        return Err(format!(
            "invalid size {text:?}: fractions are not supported, use a smaller unit (e.g. \
             \"1536M\" for 1.5G)"
        ));
    }
    let shift = match unit.trim_start().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        "p" | "pb" | "pib" => 50,
        "e" | "eb" | "eib" => 60,
        _ => {
            return Err(format!(
                "invalid size {text:?}: unknown unit {:?} (use B, K, M, G, T, P or E, with or \
                 without \"iB\")",
                unit.trim_start()
            ))
        }
    };
    let too_large = || format!("invalid size {text:?}: too large (the largest is 2^64 - 1 bytes)");
    let number: u64 = digits.parse().map_err(|_| too_large())?;
    number.checked_mul(1u64 << shift).ok_or_else(too_large)
}

/// This process's resident memory now and at its peak (VmRSS and VmHWM of /proc/self/status), in bytes.
///
/// Unlike the cgroup's charge this leaves out the page cache, so the two together tell how
/// much of a limit the store's own caches took and how much was left for the kernel's.
pub fn resident_bytes() -> Result<(u64, u64), String> {
    parse_status(&read_text(Path::new("/proc/self/status"))?)
}

/// VmRSS and VmHWM, in bytes, from the text of `/proc/<pid>/status`.
fn parse_status(text: &str) -> Result<(u64, u64), String> {
    let field = |name: &str| -> Result<u64, String> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .ok_or_else(|| format!("/proc/self/status has no {name} line"))?;
        let mut words = line.split_whitespace();
        let value: u64 = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| format!("/proc/self/status has a malformed {name} line: {line:?}"))?;
        let scale = match words.next() {
            Some("kB") => 1024,
            None => 1,
            Some(unit) => {
                return Err(format!(
                    "/proc/self/status: unknown unit {unit:?} for {name}"
                ))
            }
        };
        value
            .checked_mul(scale)
            .ok_or_else(|| format!("/proc/self/status: {name} is out of range"))
    };
    Ok((field("VmRSS")?, field("VmHWM")?))
}

/// Total bytes of the regular files under `dir` (recursively): a store's size on disk.
///
/// Sizes are file lengths, not allocated blocks. Symbolic links are not followed (except
/// `dir` itself), and files that vanish during the walk (a compaction removing its inputs)
/// are skipped rather than failing it.
pub fn dir_bytes(dir: &Path) -> io::Result<u64> {
    let mut total = 0u64;
    for_each_file(dir, &mut |_, metadata| {
        total = total.saturating_add(metadata.len());
        Ok(())
    })?;
    Ok(total)
}

/// Bytes the file system allocated to the regular files under `dir` (their blocks), which
/// differs from [`dir_bytes`] for files extended without being written (a log made long in
/// advance) and rounds every file up to whole blocks. Same walk as [`dir_bytes`].
#[cfg(unix)]
pub fn dir_allocated_bytes(dir: &Path) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0u64;
    for_each_file(dir, &mut |_, metadata| {
        total = total.saturating_add(metadata.blocks().saturating_mul(512));
        Ok(())
    })?;
    Ok(total)
}

#[cfg(not(unix))]
pub fn dir_allocated_bytes(_dir: &Path) -> io::Result<u64> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "allocated sizes of files need Unix",
    ))
}

/// Asks the kernel to drop clean page-cache pages of every regular file under `dir`
/// (posix_fadvise DONTNEED on each), so that the next reads come from the disk.
///
/// Dirty pages are not dropped (the kernel must write them first): close or flush the store
/// before calling this. After `MemoryCgroup::enter` (`cgroup.rs`) it also makes the store's
/// pages, which stay charged to the cgroup that first read them, be read and charged to the
/// new one.
pub fn drop_page_cache(dir: &Path) -> io::Result<()> {
    for_each_file(dir, &mut |path, _| {
        let file = match fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(with_path(path, e)),
        };
        fadvise_dontneed(&file).map_err(|e| with_path(path, e))
    })
}

#[cfg(target_os = "linux")]
fn fadvise_dontneed(file: &fs::File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is open for the life of `file`; fadvise only advises.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

#[cfg(not(target_os = "linux"))]
fn fadvise_dontneed(_file: &fs::File) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "dropping the page cache of a file needs Linux",
    ))
}

/// An I/O error that names the file it concerns.
fn with_path(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Calls `f` with the path and metadata of every regular file under `dir`, depth first,
/// without following symbolic links and skipping entries that vanish during the walk.
fn for_each_file(
    dir: &Path,
    f: &mut dyn FnMut(&Path, &fs::Metadata) -> io::Result<()>,
) -> io::Result<()> {
    // A stack rather than recursion, so a deep tree cannot overflow the thread's stack.
    let mut pending = vec![dir.to_path_buf()];
    let mut first = true;
    while let Some(current) = pending.pop() {
        let entries = match fs::read_dir(&current) {
            Ok(entries) => entries,
            Err(e) if !first && e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(with_path(&current, e)),
        };
        first = false;
        for entry in entries {
            let entry = entry.map_err(|e| with_path(&current, e))?;
            let path = entry.path();
            // DirEntry::metadata does not follow symbolic links.
            let metadata = match entry.metadata() {
                Ok(metadata) => metadata,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(with_path(&path, e)),
            };
            if metadata.is_dir() {
                pending.push(path);
            } else if metadata.is_file() {
                f(&path, &metadata)?;
            }
        }
    }
    Ok(())
}

/// An I/O error as a user reads it, with the hint for the one that means "not root".
pub fn describe(e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::PermissionDenied {
        format!("{e}: run as root")
    } else {
        e.to_string()
    }
}

/// Reads a whole text file, with an error that names it.
pub fn read_text(path: &Path) -> Result<String, String> {
    fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {}", path.display(), describe(&e)))
}

/// The number after `key` in a file of `key value` lines (memory.events, memory.stat).
pub fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        if words.next()? == key {
            words.next()?.parse().ok()
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn parse_size_accepts_units() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("1073741824", 1 << 30),
            ("1GiB", 1 << 30),
            ("1G", 1 << 30),
            ("1g", 1 << 30),
            ("1gb", 1 << 30),
            ("512MiB", 512 * MIB),
            ("512M", 512 * MIB),
            ("512mib", 512 * MIB),
            ("64k", 64 << 10),
            ("64KiB", 64 << 10),
            ("64 KiB", 64 << 10),
            ("  2T ", 2 << 40),
            ("100B", 100),
            ("1P", 1 << 50),
            ("15E", 15 << 60),
            ("18446744073709551615", u64::MAX),
        ];
        for &(text, want) in cases {
            assert_eq!(parse_size(text), Ok(want), "{text:?}");
        }
    }

    #[test]
    fn parse_size_rejects_bad_input() {
        let cases: &[(&str, &str)] = &[
            ("", "expected a number"),
            ("   ", "expected a number"),
            ("GiB", "expected a number"),
            ("-1G", "expected a number"),
            ("1.5G", "fractions are not supported"),
            ("12X", "unknown unit \"X\""),
            ("12 GiBs", "unknown unit \"GiBs\""),
            ("1G1", "unknown unit"),
            ("16E", "too large"),
            ("18446744073709551616", "too large"),
            ("99999999999999999999999G", "too large"),
        ];
        for &(text, want) in cases {
            let err = parse_size(text).expect_err(text);
            assert!(err.contains(want), "{text:?}: {err}");
            assert!(
                err.contains(&format!("{text:?}")),
                "error names the input: {err}"
            );
        }
    }

    #[test]
    fn parses_status() {
        let text = "Name:\tkvtool\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nThreads:\t1\n";
        assert_eq!(parse_status(text), Ok((10240 * 1024, 20480 * 1024)));
        assert!(parse_status("VmRSS:\t1 kB\n").is_err());
        assert!(parse_status("VmRSS:\tx kB\nVmHWM:\t1 kB\n").is_err());
        assert_eq!(keyed_value("low 0\nhigh 3\nmax 7\noom 1\n", "max"), Some(7));
        assert_eq!(keyed_value("max_x 7\n", "max"), None);
    }

    #[test]
    fn resident_bytes_is_plausible() {
        let (rss, hwm) = resident_bytes().expect("read /proc/self/status");
        assert!(rss > 0, "rss {rss}");
        assert!(hwm >= rss, "hwm {hwm} < rss {rss}");
        assert!(rss < 1 << 40, "rss {rss}");
    }

    #[test]
    fn dir_bytes_counts_files_recursively() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("a"), vec![1u8; 1000]).expect("write a");
        fs::write(dir.path().join("empty"), b"").expect("write empty");
        fs::create_dir_all(dir.path().join("sub/deeper")).expect("mkdir");
        fs::write(dir.path().join("sub/b"), vec![2u8; 4096]).expect("write b");
        fs::write(dir.path().join("sub/deeper/c"), vec![3u8; 7]).expect("write c");
        std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join("link")).expect("symlink");
        assert_eq!(dir_bytes(dir.path()).expect("dir_bytes"), 1000 + 4096 + 7);
        drop_page_cache(dir.path()).expect("drop_page_cache");
        assert!(dir_bytes(&dir.path().join("missing")).is_err());
        assert!(drop_page_cache(&dir.path().join("missing")).is_err());
    }
}
