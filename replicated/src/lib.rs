//! A key-value service replicated with Raft (`openraft`), stored in bloomkv.
//!
//! Each node keeps two bloomkv stores (`docs/replication.md` has the design):
//!
//! - the **log store** ([`LogStore`]): the Raft log under ordered keys, the vote and the
//!   committed index, written with synced writes where Raft needs them durable;
//! - the **state machine** ([`StateMachine`]): the service's keys and values, with the last
//!   applied log id and membership written in the same batch as the writes they describe.
//!   Its snapshot is a bloomkv checkpoint: the table files and manifest of the store as of
//!   one applied index, shipped as they are (filters inside) and opened by the follower.
//!
//! [`server`] runs a node (Raft RPCs and the client API on one loopback TCP port), and
//! [`client::Client`] talks to it.

// openraft's storage traits return its `StorageError` (over 200 bytes); the helpers that build
// those results cannot choose a smaller one.
#![allow(clippy::result_large_err)]

use serde::{Deserialize, Serialize};

mod apply;
pub mod archive;
pub mod certs;
pub mod client;
pub mod log_store;
pub mod network;
mod page_cache;
pub mod read_index;
pub mod server;
pub mod snapshot_file;
pub mod state_machine;
pub mod transport;
pub mod wire;

pub use log_store::LogStore;
pub use state_machine::StateMachine;

/// A node's id in the cluster.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The types this service runs Raft with.
    pub TypeConfig:
        D = Request,
        R = Response,
        SnapshotData = snapshot_file::SnapshotFile,
);

/// A write, proposed to the leader and applied by every node in log order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    Put {
        key: String,
        value: String,
    },
    Delete {
        key: String,
    },
    /// Puts applied together, in one log entry and one write to the store.
    PutMany {
        pairs: Vec<(String, String)>,
    },
    /// Sets `key` to `new` (`None` deletes it) if its value is `expected` (`None`: absent).
    Cas {
        key: String,
        expected: Option<String>,
        new: Option<String>,
    },
    /// `write`, the `seq`th of client `client`'s session: applied once however often it is
    /// sent (`src/apply.rs`).
    Session {
        client: u64,
        seq: u64,
        write: Box<Request>,
    },
}

/// What applying a [`Request`] returned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// The index of the log entry that carried the request (for a retried session write, the
    /// entry that applied it).
    pub index: u64,
    /// For a compare-and-swap: whether it swapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swapped: Option<bool>,
    /// For a compare-and-swap that did not swap: the value it found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<String>,
    /// A session write older than the last one its client had applied: not applied, and
    /// its own response is no longer known.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub superseded: bool,
}

/// The Raft handle of a node.
pub type Raft = openraft::Raft<TypeConfig>;

/// What openraft's storage traits return.
pub(crate) type StorageResult<T> = Result<T, openraft::StorageError<NodeId>>;

/// The value stored under `key` as JSON, if any; failures are storage errors of `subject`.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
    db: &bloomkv::Db,
    key: &[u8],
    subject: openraft::ErrorSubject<NodeId>,
) -> StorageResult<Option<T>> {
    let failed =
        |e: &dyn std::fmt::Display| storage_error(subject.clone(), openraft::ErrorVerb::Read, e);
    match db.get(key).map_err(|e| failed(&e))? {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| failed(&e)),
    }
}

/// `value` as JSON, the form both stores keep Raft's types in.
pub(crate) fn json(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("Raft's types serialize to JSON")
}

/// Turns any error into openraft's storage error for `subject`/`verb`.
pub(crate) fn storage_error(
    subject: openraft::ErrorSubject<NodeId>,
    verb: openraft::ErrorVerb,
    e: impl std::fmt::Display,
) -> openraft::StorageError<NodeId> {
    openraft::StorageIOError::new(subject, verb, openraft::AnyError::error(e.to_string())).into()
}
