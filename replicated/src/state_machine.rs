//! The service's keys and values in a bloomkv store, and its snapshots as bloomkv checkpoints.
//!
//! Keys of the store: `d` + the user's key for its value; `s` + a client id (8 bytes) for the
//! client's session (JSON, `src/apply.rs`); `m/applied` and `m/membership` (JSON) for the last
//! applied log id and membership, written in the same batch as the entries they describe, so
//! the store is always the state after some prefix of the log.
//!
//! Directory layout under the node's `sm/`:
//!
//! - `<generation>/`: the live store. Installing a snapshot opens the received files as a new
//!   generation and switches to it; `ACTIVE` names the live one (replaced by a rename, so a
//!   crash leaves the old or the new, never neither).
//! - `snapshot.meta` and `snapshot-<id>.data`: the newest snapshot built or installed, its
//!   meta (JSON, naming the data file) and its archive ([`crate::archive`]). The archive is
//!   synced and renamed into place first, then the meta replaced by a rename, and only by a
//!   newer one: a crash leaves the old pair or the new. It answers lagging followers after a
//!   restart, and a received snapshot is saved here before the store switches to it: a crash
//!   before the switch finds it here, newer than the live store, and opening installs it
//!   again.
//! - `incoming-<n>.data`: a snapshot being received (each transfer a file of its own), written
//!   chunk by chunk as Raft receives it;
//!   `building-<n>` and `building-<n>.data`: a checkpoint being packed. Opening removes them.
//!
//! Snapshots travel as files, never as one buffer: a snapshot is packed from the checkpoint's
//! files into its data file, sent from that file a chunk at a time, received into
//! `incoming-<n>.data` a chunk at a time, and unpacked from it a file at a time, so a node's
//! memory for a snapshot is a few chunks and buffers whatever the store's size.
//!
//! Writes are applied without a sync: the log is durable, and after a crash Raft applies
//! again what the store lost. The log drops entries only up to [`StateMachine::durable`]:
//! the state as of opening (recovery writes the store's log into tables), of the last
//! checkpoint (which flushes) and of the last install.

use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use bloomkv::{Db, Options};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, OptionalSend,
    RaftSnapshotBuilder, SnapshotMeta, StorageError, StoredMembership,
};

use crate::apply::{data_key, Applying};
use crate::archive;
use crate::log_store::DurableIndex;
use crate::page_cache::DropBehind;
use crate::snapshot_file::SnapshotFile;
use crate::{json, storage_error, NodeId, Response, StorageResult, TypeConfig};

const APPLIED: &[u8] = b"m/applied";
const MEMBERSHIP: &[u8] = b"m/membership";
const ACTIVE: &str = "ACTIVE";

type Membership = StoredMembership<NodeId, BasicNode>;
type Meta = SnapshotMeta<NodeId, BasicNode>;

fn sm_error(verb: ErrorVerb, e: impl std::fmt::Display) -> StorageError<NodeId> {
    storage_error(ErrorSubject::StateMachine, verb, e)
}

fn snapshot_error(verb: ErrorVerb, e: impl std::fmt::Display) -> StorageError<NodeId> {
    storage_error(ErrorSubject::Snapshot(None), verb, e)
}

/// Reads of the live store, shared with the server; it follows the store across snapshot
/// installs.
#[derive(Clone)]
pub struct StateReader {
    store: Arc<RwLock<Arc<Db>>>,
}

impl StateReader {
    fn db(&self) -> Arc<Db> {
        self.store.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The value of `key` in this node's state machine.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>, bloomkv::Error> {
        self.db().get(data_key(key.as_ref()))
    }

    /// The last log id applied here.
    pub fn applied(&self) -> Option<LogId<NodeId>> {
        read_json(&self.db(), APPLIED).ok().flatten()
    }
}

/// The state machine of one node.
pub struct StateMachine {
    root: PathBuf,
    generation: u64,
    reader: StateReader,
    snapshots_built: u64,
    /// Snapshot transfers begun since opening, naming their files.
    transfers: u64,
    saved: SavedSnapshot,
    durable: DurableIndex,
}

/// The value stored under `key` as JSON, if any.
fn read_json<T: serde::de::DeserializeOwned>(db: &Db, key: &[u8]) -> StorageResult<Option<T>> {
    crate::read_json(db, key, ErrorSubject::StateMachine)
}

/// Writes `bytes` to `path` durably: a temporary file, synced, renamed over it, and the
/// directory synced.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&temp)?;
    std::io::Write::write_all(&mut file, bytes)?;
    file.sync_all()?;
    std::fs::rename(&temp, path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::File::open(dir)?.sync_all()
}

impl StateMachine {
    /// Opens (or creates) the state machine under `root`, dropping generations a crash left
    /// half-installed, and installing again a saved snapshot newer than the live store.
    pub fn open(root: impl AsRef<Path>) -> Result<StateMachine, bloomkv::Error> {
        let root = root.as_ref().to_path_buf();
        let io = |what: &Path, e: std::io::Error| {
            bloomkv::Error::InvalidArgument(format!("{}: {e}", what.display()))
        };
        std::fs::create_dir_all(&root).map_err(|e| io(&root, e))?;
        let active = root.join(ACTIVE);
        let generation = match std::fs::read_to_string(&active) {
            Ok(text) => text.trim().parse().map_err(|_| {
                bloomkv::Error::InvalidArgument(format!(
                    "{} names no generation: {text:?}",
                    active.display()
                ))
            })?,
            // A new node. Any other failure must not be taken for one: the live generation
            // would be deleted below.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(io(&active, e)),
        };
        remove_other_generations(&root, generation);
        let failed = |e: StorageError<NodeId>| bloomkv::Error::InvalidArgument(e.to_string());
        let saved = SavedSnapshot::new(&root);
        saved.convert_single_file().map_err(failed)?;
        saved.remove_orphans().map_err(failed)?;
        let db = Db::open(root.join(generation.to_string()), Options::default())?;
        let mut sm = StateMachine {
            saved: SavedSnapshot::new(&root),
            root,
            generation,
            reader: StateReader {
                store: Arc::new(RwLock::new(Arc::new(db))),
            },
            snapshots_built: 0,
            transfers: 0,
            durable: DurableIndex::new(),
        };
        let applied = read_json::<LogId<NodeId>>(&sm.db(), APPLIED).map_err(failed)?;
        // Recovery wrote the store's own log into tables: what it holds now is durable.
        if let Some(applied) = applied {
            sm.durable.advance(applied.index);
        }
        // A crash after a received snapshot was saved, before the store switched to it.
        let saved_newer = sm
            .saved
            .meta()
            .map_err(failed)?
            .is_some_and(|m| m.last_log_id > applied);
        if saved_newer {
            if let Some((meta, data)) = sm.saved.open().map_err(failed)? {
                sm.switch_to_snapshot(&meta, &data, || Ok(()))
                    .map_err(failed)?;
            }
        }
        Ok(sm)
    }

    /// How far this state machine is durable, for the log store to purge up to.
    pub fn durable(&self) -> DurableIndex {
        self.durable.clone()
    }

    /// A reader of the live store, for serving reads.
    pub fn reader(&self) -> StateReader {
        self.reader.clone()
    }

    fn db(&self) -> Arc<Db> {
        self.reader.db()
    }

    /// Opens the files of a snapshot's archive as a new generation of the store, checks it
    /// holds the state the meta names, runs `before_switch`, and switches to it.
    fn switch_to_snapshot(
        &mut self,
        meta: &Meta,
        data: &std::fs::File,
        before_switch: impl FnOnce() -> StorageResult<()>,
    ) -> StorageResult<()> {
        let next = self.generation + 1;
        let dir = self.root.join(next.to_string());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| snapshot_error(ErrorVerb::Write, e))?;
        let mut data = std::io::BufReader::with_capacity(1 << 16, DropBehind::new(data));
        if let Err(e) = archive::unpack_from(&mut data, &dir) {
            // Torn or damaged: never opened, and the live store stays.
            let _ = std::fs::remove_dir_all(&dir);
            return Err(snapshot_error(ErrorVerb::Read, e));
        }
        let db =
            Db::open(&dir, Options::default()).map_err(|e| snapshot_error(ErrorVerb::Read, e))?;
        let applied: Option<LogId<NodeId>> = read_json(&db, APPLIED)?;
        if applied != meta.last_log_id {
            drop(db);
            let _ = std::fs::remove_dir_all(&dir);
            return Err(snapshot_error(
                ErrorVerb::Read,
                format!(
                    "snapshot {} holds the state at {applied:?}, its meta says {:?}",
                    meta.snapshot_id, meta.last_log_id
                ),
            ));
        }
        before_switch()?;
        self.switch_to(next, db)?;
        if let Some(applied) = applied {
            self.durable.advance(applied.index);
        }
        Ok(())
    }

    /// A new file name for a snapshot received, or handed over to install.
    fn next_incoming_path(&mut self) -> PathBuf {
        self.transfers += 1;
        let path = self
            .root
            .join(format!("{INCOMING}-{}.data", self.transfers));
        let _ = std::fs::remove_file(&path);
        path
    }

    /// Makes the store in generation directory `next` the live one.
    fn switch_to(&mut self, next: u64, db: Db) -> StorageResult<()> {
        write_atomically(&self.root.join(ACTIVE), next.to_string().as_bytes())
            .map_err(|e| sm_error(ErrorVerb::Write, e))?;
        *self.reader.store.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(db);
        let old_dir = self.root.join(self.generation.to_string());
        self.generation = next;
        let _ = std::fs::remove_dir_all(old_dir);
        Ok(())
    }
}

/// The newest snapshot this node built or installed (see the module comment), under a lock
/// shared by the state machine and its snapshot builders (which run in tasks of their own).
#[derive(Clone)]
struct SavedSnapshot {
    root: PathBuf,
    lock: Arc<Mutex<()>>,
}

/// What `snapshot.meta` holds.
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedMeta {
    meta: Meta,
    /// The data file's name in the state machine's directory.
    data: String,
}

const SAVED_META: &str = "snapshot.meta";
/// The start of the name of a file a snapshot is received into (`incoming-<n>.data`).
const INCOMING: &str = "incoming";
/// The single file earlier versions saved a snapshot in (meta length, meta, archive).
const SINGLE_FILE: &str = "snapshot";

impl SavedSnapshot {
    fn new(root: &Path) -> SavedSnapshot {
        SavedSnapshot {
            root: root.to_path_buf(),
            lock: Arc::new(Mutex::new(())),
        }
    }

    fn hold(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The saved snapshot's meta, without its data.
    fn meta(&self) -> StorageResult<Option<Meta>> {
        let _held = self.hold();
        Ok(self.read_meta()?.map(|saved| saved.meta))
    }

    /// The saved snapshot: its meta, and its data file opened for reading.
    fn open(&self) -> StorageResult<Option<(Meta, std::fs::File)>> {
        let _held = self.hold();
        let Some(saved) = self.read_meta()? else {
            return Ok(None);
        };
        let data = std::fs::File::open(self.root.join(&saved.data))
            .map_err(|e| snapshot_error(ErrorVerb::Read, e))?;
        Ok(Some((saved.meta, data)))
    }

    fn read_meta(&self) -> StorageResult<Option<SavedMeta>> {
        match std::fs::read(self.root.join(SAVED_META)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| snapshot_error(ErrorVerb::Read, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(snapshot_error(ErrorVerb::Read, e)),
        }
    }

    /// Saves the snapshot whose archive is the file `data` (moved into place) unless the
    /// saved one is as new or newer; says whether it did. Unsaved, `data` is left where it is.
    fn save_if_newer(&self, meta: &Meta, data: &Path) -> StorageResult<bool> {
        let _held = self.hold();
        let old = self.read_meta()?;
        if old
            .as_ref()
            .is_some_and(|old| old.meta.last_log_id >= meta.last_log_id)
        {
            return Ok(false);
        }
        let written = |e: std::io::Error| snapshot_error(ErrorVerb::Write, e);
        std::fs::File::open(data)
            .and_then(|f| f.sync_all())
            .map_err(written)?;
        let name = data_file_name(&meta.snapshot_id);
        std::fs::rename(data, self.root.join(&name)).map_err(written)?;
        // The data's new name is durable before the meta names it.
        std::fs::File::open(&self.root)
            .and_then(|dir| dir.sync_all())
            .map_err(written)?;
        let saved = SavedMeta {
            meta: meta.clone(),
            data: name.clone(),
        };
        write_atomically(&self.root.join(SAVED_META), &json(&saved)).map_err(written)?;
        if let Some(old) = old.filter(|old| old.data != name) {
            let _ = std::fs::remove_file(self.root.join(old.data));
        }
        Ok(true)
    }

    /// Deletes data files the meta does not name: left by a crash between a save's renames,
    /// or before it deleted the old one.
    fn remove_orphans(&self) -> StorageResult<()> {
        let named = self.read_meta()?.map(|saved| saved.data);
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let is_data = name.starts_with("snapshot-") && name.ends_with(".data");
            if is_data && named.as_deref() != Some(name.as_str()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(())
    }

    /// Moves a snapshot saved by an earlier version (one file: meta length as u32 big-endian,
    /// meta JSON, archive) to the two files this one keeps, copying its archive a buffer at a
    /// time.
    fn convert_single_file(&self) -> StorageResult<()> {
        let single = self.root.join(SINGLE_FILE);
        let mut file = match std::fs::File::open(&single) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(snapshot_error(ErrorVerb::Read, e)),
        };
        let read_error = |e: std::io::Error| snapshot_error(ErrorVerb::Read, e);
        let mut len = [0u8; 4];
        file.read_exact(&mut len).map_err(read_error)?;
        let mut meta = vec![0u8; u32::from_be_bytes(len) as usize];
        file.read_exact(&mut meta).map_err(read_error)?;
        let meta: Meta =
            serde_json::from_slice(&meta).map_err(|e| snapshot_error(ErrorVerb::Read, e))?;
        let data = self.root.join(format!("{INCOMING}-converted.data"));
        let mut out = std::fs::File::create(&data).map_err(read_error)?;
        std::io::copy(&mut file, &mut out).map_err(read_error)?;
        drop(out);
        if !self.save_if_newer(&meta, &data)? {
            let _ = std::fs::remove_file(&data);
        }
        std::fs::remove_file(&single).map_err(|e| snapshot_error(ErrorVerb::Write, e))
    }
}

/// The data file of snapshot `id`: its letters, digits and dashes (the id comes from the
/// leader, and must not name a path).
fn data_file_name(id: &str) -> String {
    let plain: String = (id.chars())
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(64)
        .collect();
    format!("snapshot-{plain}.data")
}

fn remove_other_generations(root: &Path, live: u64) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let is_other_generation = name.parse::<u64>().is_ok_and(|g| g != live);
        if is_other_generation || name.starts_with("building") {
            let _ = std::fs::remove_dir_all(entry.path());
        }
        if name.starts_with("building") || name.starts_with(INCOMING) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> StorageResult<(Option<LogId<NodeId>>, Membership)> {
        let db = self.db();
        let applied = read_json(&db, APPLIED)?;
        let membership = read_json(&db, MEMBERSHIP)?.unwrap_or_default();
        Ok((applied, membership))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<Response>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let db = self.db();
        let mut applying = Applying::new(&db);
        let mut replies = Vec::new();
        let mut last = None;
        for entry in entries {
            let index = entry.log_id.index;
            let response = match entry.payload {
                EntryPayload::Blank => Response {
                    index,
                    ..Response::default()
                },
                EntryPayload::Normal(request) => applying.request(index, request)?,
                EntryPayload::Membership(membership) => {
                    let stored = Membership::new(Some(entry.log_id), membership);
                    applying.put_meta(MEMBERSHIP, json(&stored));
                    Response {
                        index,
                        ..Response::default()
                    }
                }
            };
            replies.push(response);
            last = Some(entry.log_id);
        }
        if let Some(last) = last {
            applying.put_meta(APPLIED, json(&last));
            db.write(applying.into_batch())
                .map_err(|e| storage_error(ErrorSubject::Apply(last), ErrorVerb::Write, e))?;
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        self.snapshots_built += 1;
        // Taken here, with no apply running, so the checkpoint is the state at `applied`.
        let db = self.db();
        let dir = self.root.join(format!("building-{}", self.snapshots_built));
        let _ = std::fs::remove_dir_all(&dir);
        let taken = db
            .checkpoint(&dir)
            .map_err(|e| snapshot_error(ErrorVerb::Write, e))
            .and_then(|cp| {
                let applied: Option<LogId<NodeId>> = read_json(&db, APPLIED)?;
                let membership = read_json(&db, MEMBERSHIP)?.unwrap_or_default();
                Ok((cp, applied, membership))
            });
        if let Ok((_, Some(applied), _)) = &taken {
            // The checkpoint flushed the store: the state up to `applied` is durable.
            self.durable.advance(applied.index);
        }
        SnapshotBuilder {
            saved: self.saved.clone(),
            taken,
            number: self.snapshots_built,
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<SnapshotFile>> {
        // Each transfer (Raft begins a torn one again from its start) gets a file of its own:
        // one begun while an install reads the last must not truncate it.
        let path = self.next_incoming_path();
        let file = std::fs::File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|file| SnapshotFile::receiving(file, path))
            .map_err(|e| snapshot_error(ErrorVerb::Write, e))?;
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<SnapshotFile>,
    ) -> StorageResult<()> {
        let received = snapshot.path().map(Path::to_path_buf);
        let mut data = snapshot.into_std().await;
        data.seek(SeekFrom::Start(0))
            .map_err(|e| snapshot_error(ErrorVerb::Read, e))?;
        let incoming = match received {
            Some(path) => path,
            // Not received but handed over (a snapshot of this store's own, say): copied
            // into a file of its own, a buffer at a time, to be saved as a received one is.
            None => {
                let path = self.next_incoming_path();
                let written = |e: std::io::Error| snapshot_error(ErrorVerb::Write, e);
                let mut copy = std::fs::File::create(&path).map_err(written)?;
                std::io::copy(&mut data, &mut copy).map_err(written)?;
                data = std::fs::File::open(&path).map_err(written)?;
                path
            }
        };
        // Verified and opened, then saved before the switch: a crash in between finds it on
        // opening.
        let saved = self.saved.clone();
        let installed = self.switch_to_snapshot(meta, &data, || {
            if !saved.save_if_newer(meta, &incoming)? {
                let _ = std::fs::remove_file(&incoming);
            }
            Ok(())
        });
        if installed.is_err() {
            let _ = std::fs::remove_file(&incoming);
        }
        installed
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let Some((meta, data)) = self.saved.open()? else {
            return Ok(None);
        };
        let data = SnapshotFile::new(data).map_err(|e| snapshot_error(ErrorVerb::Read, e))?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(data),
        }))
    }
}

/// Packs a checkpoint taken by `get_snapshot_builder` into a snapshot.
pub struct SnapshotBuilder {
    saved: SavedSnapshot,
    taken: StorageResult<(bloomkv::Checkpoint, Option<LogId<NodeId>>, Membership)>,
    number: u64,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let (checkpoint, applied, membership) = self.taken.clone()?;
        let path = (self.saved.root).join(format!("building-{}.data", self.number));
        let written = |e: std::io::Error| snapshot_error(ErrorVerb::Write, e);
        let mut file = std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(written)?;
        let mut out = BufWriter::with_capacity(1 << 16, &mut file);
        archive::pack_to(&checkpoint.dir, &checkpoint.files, &mut out)
            .map_err(|e| snapshot_error(ErrorVerb::Read, e))?;
        out.flush().map_err(written)?;
        drop(out);
        let _ = std::fs::remove_dir_all(&checkpoint.dir);
        let snapshot_id = match applied {
            Some(id) => format!("{}-{}-{}", id.leader_id.term, id.index, self.number),
            None => format!("0-0-{}", self.number),
        };
        let meta = Meta {
            last_log_id: applied,
            last_membership: membership,
            snapshot_id,
        };
        // A build that finishes after a newer snapshot was installed leaves that one saved;
        // its own file, open here, is removed and read until the handle goes.
        if !self.saved.save_if_newer(&meta, &path)? {
            let _ = std::fs::remove_file(&path);
        }
        file.seek(SeekFrom::Start(0)).map_err(written)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(SnapshotFile::new(file).map_err(written)?),
        })
    }
}
