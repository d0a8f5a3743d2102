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
//! [`server`] runs a node (Raft RPCs and the client API as gRPC services on one port), and
//! [`client::Client`] talks to it.

// openraft's storage traits return its `StorageError` (over 200 bytes); the helpers that build
// those results cannot choose a smaller one.
#![allow(clippy::result_large_err)]

use serde::{Deserialize, Serialize};

#[cfg(feature = "mimalloc")]
pub mod allocator;
mod apply;
pub mod archive;
pub mod certs;
pub mod client;
mod codec;
pub mod log_store;
pub mod network;
mod page_cache;
pub mod read_index;
pub mod server;
pub mod snapshot_file;
pub mod state_machine;
pub mod transport;

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
        key: Blob,
        value: Blob,
    },
    Delete {
        key: Blob,
    },
    /// Puts applied together, in one log entry and one write to the store.
    PutMany {
        pairs: Vec<(Blob, Blob)>,
    },
    /// Sets `key` to `new` (`None` deletes it) if its value is `expected` (`None`: absent).
    Cas {
        key: Blob,
        expected: Option<Blob>,
        new: Option<Blob>,
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
    pub found: Option<Blob>,
    /// A session write older than the last one its client had applied: not applied, and
    /// its own response is no longer known.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub superseded: bool,
}

/// A key or a value: any bytes. The log store and the sessions keep requests and responses
/// as JSON, where these are a string when the bytes are UTF-8 (as every key and value of an
/// older log is) and an array of numbers when not; either reads back.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Blob(pub Vec<u8>);

impl Blob {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

impl AsRef<[u8]> for Blob {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Blob> for Vec<u8> {
    fn from(blob: Blob) -> Vec<u8> {
        blob.0
    }
}

impl std::fmt::Debug for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match std::str::from_utf8(&self.0) {
            Ok(text) => write!(f, "{text:?}"),
            Err(_) => write!(f, "{:x?}", self.0),
        }
    }
}

impl From<&str> for Blob {
    fn from(text: &str) -> Blob {
        Blob(text.as_bytes().to_vec())
    }
}

impl From<&[u8]> for Blob {
    fn from(bytes: &[u8]) -> Blob {
        Blob(bytes.to_vec())
    }
}

impl From<Vec<u8>> for Blob {
    fn from(bytes: Vec<u8>) -> Blob {
        Blob(bytes)
    }
}

impl From<String> for Blob {
    fn from(text: String) -> Blob {
        Blob(text.into_bytes())
    }
}

impl Serialize for Blob {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(text) => serializer.serialize_str(text),
            Err(_) => serializer.collect_seq(&self.0),
        }
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Blob, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Blob;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an array of bytes")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Blob, E> {
                Ok(Blob::from(text))
            }

            fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<Blob, E> {
                Ok(Blob::from(bytes))
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Blob, A::Error> {
                let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(byte) = seq.next_element::<u8>()? {
                    bytes.push(byte);
                }
                Ok(Blob(bytes))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
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

/// The gRPC messages and services of `proto/bloomkv.proto`, as generated.
#[allow(clippy::all, missing_docs)]
pub mod proto {
    tonic::include_proto!("bloomkv.v1");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_are_strings_in_json_when_they_are_text_and_numbers_when_not() {
        let text = Blob::from("key");
        assert_eq!(serde_json::to_string(&text).unwrap(), "\"key\"");
        let binary = Blob(vec![0xff, 0, 7]);
        assert_eq!(serde_json::to_string(&binary).unwrap(), "[255,0,7]");
        for blob in [text, binary, Blob::default()] {
            let json = serde_json::to_vec(&blob).unwrap();
            assert_eq!(serde_json::from_slice::<Blob>(&json).unwrap(), blob);
        }
        // A request as an older log holds it, with string keys, reads back.
        let old = r#"{"Put":{"key":"k","value":"v"}}"#;
        let request: Request = serde_json::from_str(old).unwrap();
        assert_eq!(
            request,
            Request::Put {
                key: Blob::from("k"),
                value: Blob::from("v")
            }
        );
        assert!(serde_json::from_str::<Blob>("[256]").is_err());
        assert!(serde_json::from_str::<Blob>("{}").is_err());
    }
}
