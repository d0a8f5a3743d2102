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

use std::io::Cursor;

use serde::{Deserialize, Serialize};

pub mod archive;
pub mod client;
pub mod log_store;
pub mod network;
pub mod server;
pub mod state_machine;
mod wire;

pub use log_store::LogStore;
pub use state_machine::StateMachine;

/// A node's id in the cluster.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The types this service runs Raft with.
    pub TypeConfig:
        D = Request,
        R = Response,
);

/// A write, proposed to the leader and applied by every node in log order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    Put { key: String, value: String },
    Delete { key: String },
}

/// What applying a [`Request`] returned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// The index of the log entry that carried the request.
    pub index: u64,
}

/// The Raft handle of a node.
pub type Raft = openraft::Raft<TypeConfig>;

/// Turns any error into openraft's storage error for `subject`/`verb`.
pub(crate) fn storage_error(
    subject: openraft::ErrorSubject<NodeId>,
    verb: openraft::ErrorVerb,
    e: impl std::fmt::Display,
) -> openraft::StorageError<NodeId> {
    openraft::StorageIOError::new(subject, verb, openraft::AnyError::error(e.to_string())).into()
}

// Keeps `Cursor` in use: `declare_raft_types!` names it for the snapshot data.
#[allow(dead_code)]
type SnapshotData = Cursor<Vec<u8>>;
