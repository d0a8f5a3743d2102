//! Applying a run of log entries as one write to the store: the batch, the values the run has
//! written so far (a compare-and-swap later in the run must see them, and the batch cannot
//! be read), and the clients' sessions.
//!
//! **Sessions make writes exactly-once.** A client that sent a write and lost the reply
//! cannot tell whether it was applied; sending it again could apply it twice. So each write
//! of a [`crate::client::Client`] carries the client's id and a sequence number one above its
//! last ([`Request::Session`]). The state machine keeps, per client, the last number it
//! applied and the response it gave, under `s` + the id (8 bytes big-endian), in the same
//! batch as the write: they are in every snapshot, and a crash keeps both or neither. A write
//! whose number is the last one applied is a retry: it is answered with the response kept,
//! and not applied again. One below is older still (its client has moved on, so nobody waits
//! for it): it is not applied, and answered `superseded`. Sessions are kept for good: a few
//! dozen bytes per client id ever seen.

use std::collections::HashMap;

use bloomkv::{Db, WriteBatch};
use openraft::{ErrorSubject, ErrorVerb};
use serde::{Deserialize, Serialize};

use crate::{json, Blob, NodeId, Request, Response, StorageResult};

/// What the state machine keeps of a client's session.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Session {
    /// The last sequence number applied.
    seq: u64,
    /// What applying it answered.
    response: Response,
}

/// The key under which the user's `key` is stored.
pub(crate) fn data_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 1);
    out.push(b'd');
    out.extend_from_slice(key);
    out
}

fn session_key(client: u64) -> Vec<u8> {
    let mut out = vec![b's'];
    out.extend_from_slice(&client.to_be_bytes());
    out
}

fn read_failed(e: impl std::fmt::Display) -> openraft::StorageError<NodeId> {
    crate::storage_error(ErrorSubject::StateMachine, ErrorVerb::Read, e)
}

/// One run of entries being applied (see the module comment).
pub(crate) struct Applying<'a> {
    db: &'a Db,
    batch: WriteBatch,
    /// Values written by the run so far (`None`: deleted), by the user's key.
    written: HashMap<Blob, Option<Blob>>,
    /// Sessions the run has changed.
    sessions: HashMap<u64, Session>,
}

impl<'a> Applying<'a> {
    pub(crate) fn new(db: &'a Db) -> Applying<'a> {
        Applying {
            db,
            batch: WriteBatch::new(),
            written: HashMap::new(),
            sessions: HashMap::new(),
        }
    }

    /// Applies `request`, carried by log entry `index`, and returns what it answers.
    pub(crate) fn request(&mut self, index: u64, request: Request) -> StorageResult<Response> {
        let mut response = Response {
            index,
            ..Response::default()
        };
        match request {
            Request::Put { key, value } => self.set(key, Some(value)),
            Request::Delete { key } => self.set(key, None),
            Request::PutMany { pairs } => {
                for (key, value) in pairs {
                    self.set(key, Some(value));
                }
            }
            Request::Cas { key, expected, new } => {
                let found = self.value(&key)?;
                let swapped = found == expected;
                if swapped {
                    self.set(key, new);
                } else {
                    response.found = found;
                }
                response.swapped = Some(swapped);
            }
            Request::Session { client, seq, write } => {
                // A session inside a session (no client of ours sends one; the server
                // refuses it) takes the outer one alone: one record per write.
                let mut write = *write;
                while let Request::Session { write: inner, .. } = write {
                    write = *inner;
                }
                return self.in_session(index, client, seq, write);
            }
        }
        Ok(response)
    }

    /// Applies `write`, the number `seq` of `client`, unless it was applied already.
    fn in_session(
        &mut self,
        index: u64,
        client: u64,
        seq: u64,
        write: Request,
    ) -> StorageResult<Response> {
        let last = self.session(client)?;
        match last {
            Some(last) if last.seq == seq => return Ok(last.response),
            Some(last) if last.seq > seq => {
                return Ok(Response {
                    index,
                    superseded: true,
                    ..Response::default()
                })
            }
            _ => {}
        }
        let response = self.request(index, write)?;
        let session = Session {
            seq,
            response: response.clone(),
        };
        self.batch.put(session_key(client), json(&session));
        self.sessions.insert(client, session);
        Ok(response)
    }

    fn set(&mut self, key: Blob, value: Option<Blob>) {
        match &value {
            Some(value) => {
                self.batch.put(data_key(key.as_bytes()), value.as_bytes());
            }
            None => {
                self.batch.delete(data_key(key.as_bytes()));
            }
        }
        self.written.insert(key, value);
    }

    /// The value of `key` as of the entries applied so far.
    fn value(&self, key: &Blob) -> StorageResult<Option<Blob>> {
        if let Some(value) = self.written.get(key) {
            return Ok(value.clone());
        }
        let stored = self.db.get(data_key(key.as_bytes())).map_err(read_failed)?;
        Ok(stored.map(Blob))
    }

    fn session(&self, client: u64) -> StorageResult<Option<Session>> {
        if let Some(session) = self.sessions.get(&client) {
            return Ok(Some(session.clone()));
        }
        crate::read_json(self.db, &session_key(client), ErrorSubject::StateMachine)
    }

    /// Adds `key` = `value` (store metadata) to the batch.
    pub(crate) fn put_meta(&mut self, key: &[u8], value: Vec<u8>) {
        self.batch.put(key, value);
    }

    /// The batch that writes the run.
    pub(crate) fn into_batch(self) -> WriteBatch {
        self.batch
    }
}
