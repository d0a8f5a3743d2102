//! Memory limits for `kvtool bench --memory-limit`.
//!
//! A benchmark of a store whose data fits in memory measures the page cache, not the store.
//! On a machine with plenty of RAM the only way to see how the store behaves when its data
//! does *not* fit is to give the benchmark less memory, and the kernel's tool for that is a
//! memory cgroup: it charges a process both for its own memory and for the page cache its
//! reads and writes bring in, and reclaims (page cache first) when the charge reaches the
//! limit. [`MemoryCgroup::enter`] makes a cgroup, limits it and moves this process into it;
//! dropping the handle undoes both. What a report says about the run besides is in
//! `memory.rs`.
//!
//! Linux only: cgroups and `/proc` are Linux interfaces. Elsewhere `enter` returns an error
//! rather than failing to build.

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use bloomkv::memory::{find_cgroups, Hierarchy};
use std::sync::atomic::{AtomicU64, Ordering};

use super::memory::{describe, keyed_value, read_text};

/// Which cgroup interface holds the limit.
///
/// The two versions name the same things differently (`memory.max` against
/// `memory.limit_in_bytes`, ...), so the handle remembers which one it used to know which
/// files to read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// The legacy per-controller hierarchies (a `cgroup` mount with the `memory` option).
    V1,
    /// The unified hierarchy (a `cgroup2` mount) with the memory controller enabled.
    V2,
}

impl fmt::Display for CgroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CgroupVersion::V1 => "cgroup v1",
            CgroupVersion::V2 => "cgroup v2",
        })
    }
}

/// A memory cgroup this process has moved itself into. Dropping it moves the process back to
/// the cgroup it came from and removes the directory it made.
///
/// The whole process (every thread) is moved, because a benchmark's memory is spent by all its
/// threads and by the page cache any of them brings in. Child processes started while inside
/// stay inside; the directory cannot be removed while they live (Drop then leaves it behind).
#[derive(Debug)]
pub struct MemoryCgroup {
    version: CgroupVersion,
    /// The directory made for this process.
    path: PathBuf,
    /// The directory of the cgroup (of the same hierarchy) the process was in before.
    original: PathBuf,
    /// The limit as the kernel reports it back (v1 rounds down to whole pages).
    limit_bytes: u64,
    /// This process's id, written to `cgroup.procs` to move it.
    pid: u32,
    /// Whether a move into `path` was attempted, so Drop knows to move the process back.
    moved: bool,
}

/// Numbers the cgroups one process makes, so that entering twice never reuses a name.
static NEXT_CGROUP: AtomicU64 = AtomicU64::new(0);

impl MemoryCgroup {
    /// Creates a fresh cgroup named `bloomkv-bench-<pid>-<n>` with a memory limit of `limit_bytes`
    /// (v2: memory.max, and memory.swap.max = 0 when present; v1: memory.limit_in_bytes, and
    /// memory.memsw.limit_in_bytes to the same value when present), then moves this whole process
    /// (write the pid to cgroup.procs) into it. Prefers v2 when a cgroup2 mount has the memory
    /// controller available (enable it in the parent's cgroup.subtree_control if it is listed in
    /// cgroup.controllers but not yet enabled; if enabling fails, fall back to v1). Errors are
    /// `String`s a user can act on: "no memory cgroup controller is mounted", "permission
    /// denied creating ...: run as root", etc.
    ///
    /// Swap is limited too (to nothing on v2, to the same total on v1) because otherwise the
    /// kernel could push the process's memory to swap instead of reclaiming page cache, and the
    /// run would measure swapping rather than the store.
    ///
    /// The new cgroup is made below the one the process is in (on v2, when that one has
    /// processes and so cannot hand the controller down, beside it), so any limit the process
    /// already had still applies.
    ///
    /// Memory charged before the move stays charged where it was: on v1 as on v2, neither the
    /// process's existing pages nor the page cache it has already read are moved with it (v1's
    /// `memory.move_charge_at_immigrate` could move mapped pages only, and is deprecated). So
    /// the limit governs what is allocated and read *after* entering; call
    /// [`drop_page_cache`](super::memory::drop_page_cache) on the store afterwards to make its
    /// pages be read, and charged, anew.
    pub fn enter(limit_bytes: u64) -> Result<MemoryCgroup, String> {
        if limit_bytes == 0 {
            return Err(
                "a memory limit of 0 bytes would leave the process no memory at all".into(),
            );
        }
        let mountinfo = read_text(Path::new("/proc/self/mountinfo"))?;
        let proc_cgroup = read_text(Path::new("/proc/self/cgroup"))?;
        let found = find_cgroups(&mountinfo, &proc_cgroup);

        let mut reasons = Vec::new();
        if let Some(v2) = &found.v2 {
            if v2.read_only {
                reasons.push(format!(
                    "the cgroup2 file system at {} is mounted read-only",
                    v2.mount_point.display()
                ));
            } else {
                match v2_parent(v2) {
                    Ok(parent) => {
                        match Self::create(CgroupVersion::V2, &parent, &v2.current, limit_bytes) {
                            Ok(cgroup) => return Ok(cgroup),
                            Err(e) if found.v1_memory.is_none() => return Err(e),
                            Err(e) => reasons.push(e),
                        }
                    }
                    Err(why) => reasons.push(why),
                }
            }
        }
        match &found.v1_memory {
            Some(v1) if v1.read_only => reasons.push(format!(
                "the memory cgroup file system at {} is mounted read-only",
                v1.mount_point.display()
            )),
            Some(v1) => {
                return Self::create(CgroupVersion::V1, &v1.current, &v1.current, limit_bytes)
                    .map_err(|e| {
                        // The v1 error is the one to act on; why v2 was passed over comes after.
                        if reasons.is_empty() {
                            e
                        } else {
                            format!("{e} (cgroup v2 not used: {})", reasons.join("; "))
                        }
                    });
            }
            None => {}
        }
        if found.v2.is_none() && found.v1_memory.is_none() {
            return Err(
                "no memory cgroup controller is mounted (no cgroup2 mount and no \
                        cgroup mount with the memory controller in /proc/self/mountinfo)"
                    .into(),
            );
        }
        if found.v1_memory.is_none() {
            reasons.push("no cgroup v1 memory hierarchy is mounted either".into());
        }
        Err(format!(
            "no usable memory cgroup controller: {}",
            reasons.join("; ")
        ))
    }

    /// Makes the directory below `parent`, sets the limits and moves the process in. On any
    /// error the handle built so far is dropped, which moves the process back and removes the
    /// directory, so a failed `enter` leaves nothing behind.
    fn create(
        version: CgroupVersion,
        parent: &Path,
        original: &Path,
        limit_bytes: u64,
    ) -> Result<MemoryCgroup, String> {
        let pid = std::process::id();
        let mut path = None;
        for _ in 0..1000 {
            let n = NEXT_CGROUP.fetch_add(1, Ordering::Relaxed);
            let dir = parent.join(format!("bloomkv-bench-{pid}-{n}"));
            match fs::create_dir(&dir) {
                Ok(()) => {
                    path = Some(dir);
                    break;
                }
                // Left behind by an earlier run whose pid was the same: take the next number.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(create_error(&dir, &e)),
            }
        }
        let Some(path) = path else {
            return Err(format!(
                "cannot create a cgroup in {}: every name bloomkv-bench-{pid}-<n> tried exists",
                parent.display()
            ));
        };
        let mut cgroup = MemoryCgroup {
            version,
            path,
            original: original.to_path_buf(),
            limit_bytes,
            pid,
            moved: false,
        };
        let limit = limit_bytes.to_string();
        match version {
            CgroupVersion::V2 => {
                cgroup.write("memory.max", &limit)?;
                if cgroup.path.join("memory.swap.max").exists() {
                    cgroup.write("memory.swap.max", "0")?;
                }
            }
            CgroupVersion::V1 => {
                // Order matters: memsw must never be below the memory limit, and both start
                // unlimited, so lower the memory limit first.
                cgroup.write("memory.limit_in_bytes", &limit)?;
                if cgroup.path.join("memory.memsw.limit_in_bytes").exists() {
                    cgroup.write("memory.memsw.limit_in_bytes", &limit)?;
                }
            }
        }
        // Report the limit the kernel applies: v1 rounds it down to whole pages.
        let limit_file = match version {
            CgroupVersion::V2 => "memory.max",
            CgroupVersion::V1 => "memory.limit_in_bytes",
        };
        if let Ok(applied) = cgroup.read_u64(limit_file) {
            cgroup.limit_bytes = applied;
        }
        cgroup.moved = true;
        write_file(&cgroup.path.join("cgroup.procs"), &pid.to_string()).map_err(|e| {
            format!(
                "cannot move process {pid} into {}: {}",
                cgroup.path.display(),
                describe(&e)
            )
        })?;
        Ok(cgroup)
    }

    /// Which interface holds the limit, so a report can say how it was enforced.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// The cgroup's directory, for a report or for looking at other files in it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The limit in bytes, as the kernel applies it (v1 rounds the requested value down to
    /// whole pages).
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// Current charge (v2 memory.current, v1 memory.usage_in_bytes): process memory plus the
    /// page cache it caused.
    ///
    /// This, not the resident size, is what the limit is compared with.
    pub fn usage_bytes(&self) -> Result<u64, String> {
        self.read_u64(match self.version {
            CgroupVersion::V2 => "memory.current",
            CgroupVersion::V1 => "memory.usage_in_bytes",
        })
    }

    /// Peak charge since entering (v2 memory.peak when present, else None; v1 memory.max_usage_in_bytes).
    ///
    /// The cgroup is fresh, so its peak is the peak of this run alone. `memory.peak` is new in
    /// Linux 5.19, hence the `None`.
    pub fn peak_bytes(&self) -> Option<u64> {
        self.read_u64(match self.version {
            CgroupVersion::V2 => "memory.peak",
            CgroupVersion::V1 => "memory.max_usage_in_bytes",
        })
        .ok()
    }

    /// Times the limit was hit (v1 memory.failcnt; v2 the `max` field of memory.events).
    ///
    /// Zero means the run never felt the limit: its data fit, and the limit was not the point.
    pub fn limit_hits(&self) -> Option<u64> {
        match self.version {
            CgroupVersion::V1 => self.read_u64("memory.failcnt").ok(),
            CgroupVersion::V2 => {
                let text = read_text(&self.path.join("memory.events")).ok()?;
                keyed_value(&text, "max")
            }
        }
    }

    /// Writes `value` to the file `name` in the cgroup, with an error that names both.
    fn write(&self, name: &str, value: &str) -> Result<(), String> {
        let file = self.path.join(name);
        write_file(&file, value).map_err(|e| {
            format!(
                "cannot write {value} to {}: {}",
                file.display(),
                describe(&e)
            )
        })
    }

    /// Reads the file `name` in the cgroup as one decimal number.
    fn read_u64(&self, name: &str) -> Result<u64, String> {
        let file = self.path.join(name);
        let text = read_text(&file)?;
        text.trim().parse().map_err(|_| {
            format!(
                "{} holds {:?}, not a number of bytes",
                file.display(),
                text.trim()
            )
        })
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        if self.moved {
            // Ignored: if the original cgroup is gone there is nowhere better to go, and the
            // rmdir below then fails and leaves the directory, which is harmless.
            let _ = write_file(&self.original.join("cgroup.procs"), &self.pid.to_string());
        }
        // Moving out is synchronous, but retry briefly in case the kernel still counts the
        // cgroup as populated (EBUSY) for a moment.
        for attempt in 0..20 {
            match fs::remove_dir(&self.path) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && attempt < 19 => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(_) => break,
            }
        }
    }
}

/// The error for a failed `mkdir` of a cgroup, with what to do about it.
fn create_error(dir: &Path, e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::PermissionDenied {
        format!("permission denied creating {}: run as root", dir.display())
    } else if e.raw_os_error() == Some(libc::EROFS) {
        format!(
            "cannot create {}: the cgroup file system is read-only (in a container, give it a \
             writable cgroup mount)",
            dir.display()
        )
    } else {
        format!("cannot create {}: {}", dir.display(), describe(e))
    }
}

/// Writes `value` to an existing (cgroup) file in one `write`, as the kernel wants; unlike
/// `fs::write` it neither creates nor truncates.
fn write_file(path: &Path, value: &str) -> io::Result<()> {
    let mut file = fs::OpenOptions::new().write(true).open(path)?;
    file.write_all(value.as_bytes())
}

/// Whether the controller list in `file` (cgroup.controllers, cgroup.subtree_control) names
/// the memory controller.
fn lists_memory(file: &Path) -> bool {
    fs::read_to_string(file)
        .map(|text| text.split_whitespace().any(|c| c == "memory"))
        .unwrap_or(false)
}

/// The v2 cgroup to make the new one in: one whose children get the memory controller.
///
/// The process's own cgroup comes first. But v2 forbids a cgroup other than the root to both
/// hold processes and hand controllers to its children, and this process is in its own cgroup,
/// so unless that is the root the new cgroup goes beside it, in the parent (still below
/// every limit that applied before). Candidates that already hand down the memory controller
/// are preferred over enabling it anywhere.
fn v2_parent(v2: &Hierarchy) -> Result<PathBuf, String> {
    let mut candidates = vec![v2.current.clone()];
    if v2.current != v2.mount_point {
        if let Some(parent) = v2.current.parent() {
            if parent.starts_with(&v2.mount_point) {
                candidates.push(parent.to_path_buf());
            }
        }
    }
    if let Some(ready) = candidates
        .iter()
        .find(|c| lists_memory(&c.join("cgroup.subtree_control")))
    {
        return Ok(ready.clone());
    }
    let mut reasons = Vec::new();
    for candidate in &candidates {
        if !lists_memory(&candidate.join("cgroup.controllers")) {
            continue;
        }
        let control = candidate.join("cgroup.subtree_control");
        match write_file(&control, "+memory") {
            Ok(()) => return Ok(candidate.clone()),
            Err(e) => reasons.push(format!(
                "cannot enable the memory controller in {}: {}",
                control.display(),
                describe(&e)
            )),
        }
    }
    if reasons.is_empty() {
        Err(format!(
            "the cgroup2 hierarchy at {} has no memory controller (it is bound to cgroup v1 \
             or disabled)",
            v2.mount_point.display()
        ))
    } else {
        Err(reasons.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::memory::resident_bytes;

    const MIB: u64 = 1 << 20;

    #[test]
    fn enter_rejects_a_zero_limit() {
        let err = MemoryCgroup::enter(0).expect_err("zero limit");
        assert!(err.contains("0 bytes"), "{err}");
    }

    /// Set in the environment of the child process that really enters a cgroup.
    const CHILD_ENV: &str = "BLOOMKV_MEMLIMIT_CHILD";

    /// Why this machine cannot run the end-to-end test, or None when it can.
    fn cannot_enter() -> Option<String> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        if euid != 0 {
            return Some(format!("not root (euid {euid})"));
        }
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
        let proc_cgroup = fs::read_to_string("/proc/self/cgroup").ok()?;
        let found = find_cgroups(&mountinfo, &proc_cgroup);
        let v1 = found.v1_memory.filter(|h| !h.read_only);
        let v2 = found.v2.filter(|h| {
            !h.read_only
                && (lists_memory(&h.current.join("cgroup.controllers"))
                    || h.current
                        .parent()
                        .is_some_and(|p| lists_memory(&p.join("cgroup.controllers"))))
        });
        if v1.is_none() && v2.is_none() {
            return Some("no writable memory cgroup controller is mounted".into());
        }
        None
    }

    /// Runs `child_entry` in a child process (moving this multi-threaded test process into a
    /// cgroup would move every other test with it) and checks that it passed.
    #[test]
    fn enters_a_cgroup_in_a_child_process() {
        if let Some(why) = cannot_enter() {
            println!("skipping the memory cgroup test: {why}");
            return;
        }
        let exe = std::env::current_exe().expect("current_exe");
        let output = std::process::Command::new(exe)
            .args([
                "--exact",
                "bench::cgroup::tests::child_entry",
                "--nocapture",
            ])
            .env(CHILD_ENV, "1")
            .output()
            .expect("run the child test");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        println!("child stdout:\n{stdout}\nchild stderr:\n{stderr}");
        assert!(output.status.success(), "child failed: {}", output.status);
        assert!(
            stdout.contains("1 passed"),
            "the child did not run child_entry"
        );
        assert!(
            stdout.contains("child: entered"),
            "the child skipped its checks"
        );
    }

    /// The child's half of `enters_a_cgroup_in_a_child_process`; does nothing without its
    /// environment variable.
    #[test]
    fn child_entry() {
        if std::env::var_os(CHILD_ENV).is_none() {
            return;
        }
        let limit = 256 * MIB;
        let cgroup = MemoryCgroup::enter(limit).expect("enter a memory cgroup");
        let path = cgroup.path().to_path_buf();
        println!(
            "child: entered {} ({}), limit {}",
            path.display(),
            cgroup.version(),
            cgroup.limit_bytes()
        );
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("cgroup name")
            .to_string();
        assert!(
            name.starts_with(&format!("bloomkv-bench-{}-", std::process::id())),
            "{name}"
        );
        assert_eq!(cgroup.limit_bytes(), limit);
        let procs = fs::read_to_string(path.join("cgroup.procs")).expect("read cgroup.procs");
        let pid = std::process::id().to_string();
        assert!(
            procs.lines().any(|l| l.trim() == pid),
            "{pid} not in {procs:?}"
        );
        let own = fs::read_to_string("/proc/self/cgroup").expect("read /proc/self/cgroup");
        assert!(
            own.contains(&name),
            "/proc/self/cgroup does not show {name}: {own}"
        );
        // What the store reads for its defaults that scale with memory: this limit, or a
        // smaller one above it.
        let available = bloomkv::memory::available();
        assert!(
            available.is_some_and(|a| a > 0 && a <= limit),
            "{available:?} against a limit of {limit}"
        );

        let before = cgroup.usage_bytes().expect("usage");
        assert!(before > 0, "usage {before}");
        let mut block = vec![0u8; 64 * MIB as usize];
        // Write to every page, so that each is really allocated and charged.
        for byte in block.iter_mut().step_by(4096) {
            *byte = 1;
        }
        std::hint::black_box(&mut block);
        let after = cgroup.usage_bytes().expect("usage");
        println!("child: usage {before} -> {after} after touching 64 MiB");
        assert!(after >= before + 48 * MIB, "usage {before} -> {after}");
        assert!(after < limit, "usage {after} over the limit {limit}");
        let peak = cgroup.peak_bytes();
        if cgroup.version() == CgroupVersion::V1 {
            assert!(
                peak.is_some_and(|p| p >= after),
                "peak {peak:?} < usage {after}"
            );
        }
        assert!(cgroup.limit_hits().is_some());
        let (rss, hwm) = resident_bytes().expect("resident_bytes");
        assert!(rss >= 48 * MIB && hwm >= rss, "rss {rss}, hwm {hwm}");
        drop(block);

        drop(cgroup);
        assert!(!path.exists(), "{} still exists", path.display());
        let own = fs::read_to_string("/proc/self/cgroup").expect("read /proc/self/cgroup");
        assert!(!own.contains(&name), "still in {name}: {own}");
    }
}
