//! Where a bench writes: a scratch directory for its throwaway stores, and its result files
//! (`--json`, `--plot`, `--chart`), checked before the run so that a long run never ends
//! unable to write them.

use std::path::Path;

use super::args::BenchArgs;
use crate::Failure;

/// A directory for throwaway stores inside `parent` (`--db`; the temp directory without it),
/// removed when dropped.
pub fn scratch_dir(parent: Option<&Path>, prefix: &str) -> Result<tempfile::TempDir, Failure> {
    let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
    let cannot = |why: String| {
        Failure::from(format!(
            "cannot make the bench's stores in {}: {why}",
            parent.display()
        ))
    };
    if !parent.exists() {
        return Err(cannot("no such directory".into()));
    }
    if !parent.is_dir() {
        return Err(cannot("not a directory".into()));
    }
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(&parent)
        .map_err(|e| cannot(e.to_string()))
}

/// Fails unless each file the bench will write its results to (`--json`, `--plot`,
/// `--chart`) is in a directory that exists: better now than after the run.
pub fn check_result_paths(args: &BenchArgs) -> Result<(), Failure> {
    let files = [&args.json, &args.plot, &args.chart];
    for path in files.into_iter().flatten() {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir.filter(|d| !d.is_dir()) {
            return Err(Failure::from(format!(
                "cannot write {}: no such directory {}",
                path.display(),
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Writes one of the bench's result files and says so on stderr.
pub fn write_result(path: &Path, contents: &str) -> Result<(), Failure> {
    std::fs::write(path, contents)
        .map_err(|e| Failure::from(format!("cannot write {}: {e}", path.display())))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
