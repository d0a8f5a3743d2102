//! The service's keys and values in a bloomkv store, and its snapshots as bloomkv checkpoints.
//!
//! Keys of the store: `d` + the user's key for its value; `m/applied` and `m/membership` (JSON)
//! for the last applied log id and membership, written in the same batch as the entries they
//! describe, so the store is always the state after some prefix of the log.
//!
//! Directory layout under the node's `sm/`:
//!
//! - `<generation>/`: the live store. Installing a snapshot opens the received files as a new
//!   generation and switches to it; `ACTIVE` names the live one (replaced by a rename, so a
//!   crash leaves the old or the new, never neither).
//! - `snapshot`: the newest snapshot built or installed, one file (meta length as u32
//!   big-endian, meta JSON, archive), replaced by a rename and only by a newer one. It answers
//!   lagging followers after a restart, and a received snapshot is saved here before the store
//!   switches to it: a crash before the switch finds it here, newer than the live store, and
//!   opening installs it again.
//!
//! Writes are applied without a sync: the log is durable, and after a crash Raft applies
//! again what the store lost. The log drops entries only up to [`StateMachine::durable`]:
//! the state as of opening (recovery writes the store's log into tables), of the last
//! checkpoint (which flushes) and of the last install.

use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use bloomkv::{Db, Options, WriteBatch};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, OptionalSend,
    RaftSnapshotBuilder, SnapshotMeta, StorageError, StoredMembership,
};

use crate::archive;
use crate::log_store::DurableIndex;
use crate::{json, storage_error, NodeId, Request, Response, StorageResult, TypeConfig};

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

/// The key under which the user's `key` is stored.
fn data_key(key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 1);
    out.push(b'd');
    out.extend_from_slice(key.as_bytes());
    out
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
    pub fn get(&self, key: &str) -> Result<Option<String>, bloomkv::Error> {
        Ok(self
            .db()
            .get(data_key(key))?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
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
        let db = Db::open(root.join(generation.to_string()), Options::default())?;
        let mut sm = StateMachine {
            saved: SavedSnapshot::new(&root),
            root,
            generation,
            reader: StateReader {
                store: Arc::new(RwLock::new(Arc::new(db))),
            },
            snapshots_built: 0,
            durable: DurableIndex::new(),
        };
        let failed = |e: StorageError<NodeId>| bloomkv::Error::InvalidArgument(e.to_string());
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
            if let Some((meta, data)) = sm.saved.load().map_err(failed)? {
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
        data: &[u8],
        before_switch: impl FnOnce() -> StorageResult<()>,
    ) -> StorageResult<()> {
        let next = self.generation + 1;
        let dir = self.root.join(next.to_string());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| snapshot_error(ErrorVerb::Write, e))?;
        archive::unpack_into(data, &dir).map_err(|e| snapshot_error(ErrorVerb::Read, e))?;
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

/// The newest snapshot this node built or installed, in one file under a lock shared by the
/// state machine and its snapshot builders (which run in tasks of their own).
#[derive(Clone)]
struct SavedSnapshot {
    path: PathBuf,
    lock: Arc<Mutex<()>>,
}

impl SavedSnapshot {
    fn new(root: &Path) -> SavedSnapshot {
        SavedSnapshot {
            path: root.join("snapshot"),
            lock: Arc::new(Mutex::new(())),
        }
    }

    /// The saved snapshot's meta, without reading its data.
    fn meta(&self) -> StorageResult<Option<Meta>> {
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        Ok(self.read(false)?.map(|(meta, _)| meta))
    }

    /// The saved snapshot, meta and data.
    fn load(&self) -> StorageResult<Option<(Meta, Vec<u8>)>> {
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.read(true)
    }

    fn read(&self, with_data: bool) -> StorageResult<Option<(Meta, Vec<u8>)>> {
        let mut file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(snapshot_error(ErrorVerb::Read, e)),
        };
        let read_error = |e: std::io::Error| snapshot_error(ErrorVerb::Read, e);
        let mut len = [0u8; 4];
        file.read_exact(&mut len).map_err(read_error)?;
        let mut meta = vec![0u8; u32::from_be_bytes(len) as usize];
        file.read_exact(&mut meta).map_err(read_error)?;
        let meta: Meta =
            serde_json::from_slice(&meta).map_err(|e| snapshot_error(ErrorVerb::Read, e))?;
        let mut data = Vec::new();
        if with_data {
            file.read_to_end(&mut data).map_err(read_error)?;
        }
        Ok(Some((meta, data)))
    }

    /// Saves the snapshot unless the saved one is as new or newer.
    fn save_if_newer(&self, meta: &Meta, data: &[u8]) -> StorageResult<()> {
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((saved, _)) = self.read(false)? {
            if saved.last_log_id >= meta.last_log_id {
                return Ok(());
            }
        }
        let meta_json = json(meta);
        let mut bytes = Vec::with_capacity(4 + meta_json.len() + data.len());
        bytes.extend_from_slice(&(meta_json.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&meta_json);
        bytes.extend_from_slice(data);
        write_atomically(&self.path, &bytes).map_err(|e| snapshot_error(ErrorVerb::Write, e))
    }
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
        let mut batch = WriteBatch::new();
        let mut replies = Vec::new();
        let mut last = None;
        for entry in entries {
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(Request::Put { key, value }) => {
                    batch.put(data_key(&key), value.as_bytes());
                }
                EntryPayload::Normal(Request::Delete { key }) => {
                    batch.delete(data_key(&key));
                }
                EntryPayload::Membership(membership) => {
                    batch.put(
                        MEMBERSHIP,
                        json(&Membership::new(Some(entry.log_id), membership)),
                    );
                }
            }
            replies.push(Response {
                index: entry.log_id.index,
            });
            last = Some(entry.log_id);
        }
        if let Some(last) = last {
            batch.put(APPLIED, json(&last));
            self.db()
                .write(batch)
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

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StorageResult<()> {
        let data = snapshot.into_inner();
        // Verified and opened, then saved before the switch: a crash in between finds it on
        // opening.
        let saved = self.saved.clone();
        self.switch_to_snapshot(meta, &data, || saved.save_if_newer(meta, &data))
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        Ok(self.saved.load()?.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
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
        let data = archive::pack(&checkpoint.dir, &checkpoint.files)
            .map_err(|e| snapshot_error(ErrorVerb::Read, e))?;
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
        // A build that finishes after a newer snapshot was installed leaves that one saved.
        self.saved.save_if_newer(&meta, &data)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}
