//! What `FaultFs` keeps: inodes and their durable content, the names of the live and the
//! durable directory trees, the faults armed, and what a crash or a power cut leaves of the
//! bytes not yet synced.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar};

use super::{CrashMode, PAGE_SIZE};
use crate::error::{Error, Result};

/// The durable content of an inode: usually a prefix of its current bytes (only appends
/// happened since the last sync); a copy once a truncation has made it diverge.
#[derive(Debug, Clone)]
pub(super) enum Durable {
    Prefix(usize),
    Owned(Vec<u8>),
}

#[derive(Debug)]
pub(super) struct Inode {
    pub(super) data: Vec<u8>,
    pub(super) durable: Durable,
    pub(super) open_handles: usize,
}

impl Inode {
    pub(super) fn new() -> Inode {
        Inode {
            data: Vec::new(),
            durable: Durable::Prefix(0),
            open_handles: 0,
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Faults {
    /// Appends still to pass before one fails (`Some(0)`: the next one fails).
    pub(super) append_countdown: Option<u64>,
    /// The next append to a table file panics.
    pub(super) panic_next_table_append: bool,
    /// The next sync of a WAL file panics.
    pub(super) panic_next_wal_sync: bool,
    /// While true, every append to a table file fails.
    pub(super) table_appends_fail: bool,
    pub(super) fail_next_sync: bool,
    pub(super) fail_next_dir_sync: bool,
    /// While true, every directory sync fails.
    pub(super) dir_syncs_fail: bool,
    pub(super) space_left: Option<u64>,
    pub(super) read_countdown: Option<u64>,
    pub(super) reads_fail: bool,
    /// Mutating operations still allowed before the power is cut.
    pub(super) power_countdown: Option<u64>,
    pub(super) power_cut: bool,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) inodes: HashMap<u64, Inode>,
    pub(super) next_inode: u64,
    pub(super) live: BTreeMap<PathBuf, u64>,
    pub(super) durable: BTreeMap<PathBuf, u64>,
    /// Directories as `create_dir_all` left them, and those whose entry a `sync_dir` of their
    /// parent made durable.
    pub(super) dirs: HashSet<PathBuf>,
    pub(super) durable_dirs: HashSet<PathBuf>,
    /// Exclusive locks held.
    pub(super) locks: HashSet<PathBuf>,
    /// Shared locks held, by path: how many holders.
    pub(super) shared_locks: HashMap<PathBuf, usize>,
    /// Incremented by every crash; handles from an older epoch are dead.
    pub(super) epoch: u64,
    pub(super) faults: Faults,
    pub(super) crash_mode: CrashMode,
    pub(super) rng: u64,
    /// Files whose reads wait until released, and the reads waiting now.
    pub(super) held_reads: HashSet<PathBuf>,
    pub(super) waiting_reads: usize,
    /// Signalled when held reads are released.
    pub(super) reads_released: Arc<Condvar>,
}

pub(super) fn injected(context: String, kind: ErrorKind, msg: &str) -> Error {
    Error::io(context, std::io::Error::new(kind, msg.to_string()))
}

pub(super) fn not_found(what: &str, path: &Path) -> Error {
    injected(
        format!("{what} {}", path.display()),
        ErrorKind::NotFound,
        "no such file or directory",
    )
}

pub(super) fn parent_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// The root (`/`, or the empty path of a relative name): it exists and is durable always.
pub(super) fn is_root(dir: &Path) -> bool {
    dir.as_os_str().is_empty() || dir.parent().is_none()
}

/// splitmix64: a small, seedable generator for the torn-write modes.
pub(super) fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform value in `0..=max`.
pub(super) fn random_up_to(state: &mut u64, max: usize) -> usize {
    let span = max as u64;
    if span == u64::MAX {
        return next_random(state) as usize;
    }
    (next_random(state) % (span + 1)) as usize
}

impl State {
    pub(super) fn dir_exists(&self, dir: &Path) -> bool {
        is_root(dir) || self.dirs.contains(dir)
    }

    /// The directories a crash leaves: those whose entry is durable, in a parent that
    /// survives too.
    pub(super) fn surviving_dirs(&self) -> HashSet<PathBuf> {
        self.durable_dirs
            .iter()
            .filter(|d| {
                d.ancestors()
                    .skip(1)
                    .all(|a| is_root(a) || self.durable_dirs.contains(a))
            })
            .cloned()
            .collect()
    }

    pub(super) fn check_epoch(&self, epoch: u64, what: &str, path: &Path) -> Result<()> {
        if epoch != self.epoch {
            return Err(injected(
                format!("{what} {}", path.display()),
                ErrorKind::Other,
                "file handle was invalidated by a simulated power loss",
            ));
        }
        if self.faults.power_cut {
            return Err(injected(
                format!("{what} {}", path.display()),
                ErrorKind::Other,
                "simulated power cut: the machine is down",
            ));
        }
        Ok(())
    }

    /// Counts one mutating operation against `cut_power_after`; fails once the power is out.
    pub(super) fn mutating_op(&mut self, what: &str, path: &Path) -> Result<()> {
        self.check_epoch(self.epoch, what, path)?;
        if let Some(n) = self.faults.power_countdown {
            if n == 0 {
                self.faults.power_countdown = None;
                self.faults.power_cut = true;
                return self.check_epoch(self.epoch, what, path);
            }
            self.faults.power_countdown = Some(n - 1);
        }
        Ok(())
    }

    pub(super) fn release_reads(&mut self) {
        self.held_reads.clear();
        self.reads_released.notify_all();
    }

    pub(super) fn read_fault(&mut self, what: &str, path: &Path) -> Result<()> {
        self.check_epoch(self.epoch, what, path)?;
        if self.faults.reads_fail {
            return Err(injected(
                format!("{what} {}", path.display()),
                ErrorKind::Other,
                "injected read failure",
            ));
        }
        if let Some(n) = self.faults.read_countdown {
            if n == 0 {
                self.faults.read_countdown = None;
                return Err(injected(
                    format!("{what} {}", path.display()),
                    ErrorKind::Other,
                    "injected read failure",
                ));
            }
            self.faults.read_countdown = Some(n - 1);
        }
        Ok(())
    }

    pub(super) fn inode_mut(&mut self, id: u64, path: &Path) -> Result<&mut Inode> {
        self.inodes
            .get_mut(&id)
            .ok_or_else(|| not_found("using", path))
    }

    /// Drops inodes that no name (live or durable) and no open handle refers to.
    pub(super) fn collect_garbage(&mut self) {
        let referenced: HashSet<u64> = self
            .live
            .values()
            .chain(self.durable.values())
            .copied()
            .collect();
        self.inodes
            .retain(|id, inode| inode.open_handles > 0 || referenced.contains(id));
    }

    pub(super) fn new_inode(&mut self) -> u64 {
        let id = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(id, Inode::new());
        id
    }

    pub(super) fn crash(&mut self) {
        self.release_reads();
        self.epoch += 1;
        self.locks.clear();
        self.shared_locks.clear();
        self.faults = Faults::default();
        self.dirs = self.surviving_dirs();
        self.durable_dirs = self.dirs.clone();
        let dirs = &self.dirs;
        self.durable
            .retain(|p, _| is_root(&parent_of(p)) || dirs.contains(&parent_of(p)));
        self.live = self.durable.clone();
        let referenced: HashSet<u64> = self.durable.values().copied().collect();
        self.inodes.retain(|id, _| referenced.contains(id));
        let mode = self.crash_mode;
        let mut ids: Vec<u64> = self.inodes.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let Some(inode) = self.inodes.get_mut(&id) else {
                continue;
            };
            inode.open_handles = 0;
            match std::mem::replace(&mut inode.durable, Durable::Prefix(0)) {
                Durable::Owned(bytes) => inode.data = bytes,
                Durable::Prefix(len) => {
                    let len = len.min(inode.data.len());
                    lose_unsynced(&mut inode.data, len, mode, &mut self.rng);
                }
            }
            inode.durable = Durable::Prefix(inode.data.len());
        }
    }
}

/// What a crash leaves of a file whose first `durable` bytes were synced and whose later
/// bytes were not.
pub(super) fn lose_unsynced(data: &mut Vec<u8>, durable: usize, mode: CrashMode, rng: &mut u64) {
    let unsynced = data.len() - durable;
    let (keep, fill) = match mode {
        CrashMode::DropUnsynced => (0, None),
        CrashMode::KeepPrefix { .. } => (random_up_to(rng, unsynced), None),
        CrashMode::ZeroTail { .. } | CrashMode::GarbageTail { .. } => {
            let keep = random_up_to(rng, unsynced);
            let fill = random_up_to(rng, unsynced - keep);
            (keep, Some(fill))
        }
        CrashMode::LosePages { .. } => return lose_pages(data, durable, rng),
    };
    data.truncate(durable + keep);
    if let Some(fill) = fill {
        let garbage = matches!(mode, CrashMode::GarbageTail { .. });
        for _ in 0..fill {
            let b = if garbage { next_random(rng) as u8 } else { 0 };
            data.push(b);
        }
    }
}

/// [`CrashMode::LosePages`]: zeros the unsynced bytes of a random subset of the pages past
/// `durable`, then keeps the length or cuts the unsynced part short.
pub(super) fn lose_pages(data: &mut Vec<u8>, durable: usize, rng: &mut u64) {
    let loss_percent = random_up_to(rng, 100);
    let mut page_start = durable / PAGE_SIZE * PAGE_SIZE;
    while page_start < data.len() {
        let end = (page_start + PAGE_SIZE).min(data.len());
        if random_up_to(rng, 99) < loss_percent {
            // The synced bytes of a page reached the disk at their sync; only the rest is lost.
            data[page_start.max(durable)..end].fill(0);
        }
        page_start += PAGE_SIZE;
    }
    let keep_length = next_random(rng) & 1 == 0;
    if !keep_length {
        let keep = random_up_to(rng, data.len() - durable);
        data.truncate(durable + keep);
    }
}
