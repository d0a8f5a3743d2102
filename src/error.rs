//! The store's error type: every failure a caller can see, typed, naming what and where.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::filter::FilterError;

/// Result alias used throughout the store.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong in bloomkv.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O failure, with what was being done when it happened.
    Io {
        /// What was being done: the call and the file.
        context: String,
        /// The operating system's error.
        source: io::Error,
    },
    /// A file's bytes are not what bloomkv wrote: bad magic, checksum mismatch, truncation,
    /// a block handle pointing outside the file. Names the file and, where known, the offset.
    Corruption {
        /// The damaged file.
        file: PathBuf,
        /// Where in it the damage was found, when known.
        offset: Option<u64>,
        /// What was wrong.
        reason: String,
    },
    /// The store is open already: a handle of it lives (a `Db` or anything it gave), in this
    /// process or another, and holds the directory's LOCK file.
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// A key longer than the store accepts.
    KeyTooLarge {
        /// The key's length in bytes.
        len: usize,
        /// The longest key the store accepts.
        max: usize,
    },
    /// A value longer than the store accepts.
    ValueTooLarge {
        /// The value's length in bytes.
        len: usize,
        /// The longest value the store accepts.
        max: usize,
    },
    /// The directory holds a store's files but no `CURRENT`, the file naming the manifest:
    /// the store lost its pointer. Creating a new store there would discard them, so opening
    /// is refused; `files` names what is there.
    MissingCurrent {
        /// The store's directory.
        dir: PathBuf,
        /// The store's files found in it.
        files: Vec<String>,
    },
    /// A caller-supplied argument or option is out of range.
    InvalidArgument(String),
    /// A write to the WAL failed, so the store refuses writes until a new log is started
    /// (by itself, with backoff, or by [`crate::Db::resume`]); reads still work.
    WritesRefused {
        /// The WAL write's failure.
        reason: String,
    },
    /// A flush or compaction failed. Nothing a reader sees changed; the store retries the
    /// work with backoff and carries on by itself once the cause is gone (a full disk has room
    /// again). Returned by calls that wait for that work, and by writes that would have to
    /// wait for it (memory for writes is full).
    Background {
        /// The flush's or compaction's failure.
        reason: String,
    },
    /// The store was opened read-only ([`crate::Db::open_read_only`]).
    ReadOnly,
    /// A write of `count` entries would number them past the largest sequence number a store
    /// may use.
    SequenceExhausted {
        /// The store's last sequence number.
        last: u64,
        /// The entries the write holds.
        count: u64,
        /// The largest sequence number a store may use.
        max: u64,
    },
    /// A Bloom filter operation failed (bad parameters, shape mismatch, corrupt serialized form).
    Filter(FilterError),
    /// A transaction's commit was not made: `key` (in one of the keyspaces it read or wrote)
    /// changed since the transaction read it, or was written by another before it. `current`
    /// is what the key held when the condition was checked. Nothing of the commit is in the
    /// store; begin a new transaction and retry. (A compare-and-swap that finds another value
    /// answers [`Mismatch`](crate::Mismatch) instead.)
    Conflict {
        /// The key that changed.
        key: Vec<u8>,
        /// What it held when the condition was checked (`None`: nothing).
        current: Option<Vec<u8>>,
    },
    /// The keyspace a read or write names is not in the store: it was dropped (a handle of it
    /// outlived the drop), or a batch made for another store names one this store lacks.
    NoSuchKeyspace {
        /// The keyspace's name (or number, for a batch of another store).
        name: String,
    },
}

impl Error {
    /// A corruption error for `file`, at `offset` when it is known.
    pub fn corruption(file: &Path, offset: Option<u64>, reason: impl Into<String>) -> Error {
        Error::Corruption {
            file: file.to_path_buf(),
            offset,
            reason: reason.into(),
        }
    }

    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// The same error again, for each writer of a group that failed together. An I/O error's
    /// source is copied as its kind and message (`io::Error` cannot be cloned).
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { context, source } => Error::Io {
                context: context.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corruption {
                file,
                offset,
                reason,
            } => Error::Corruption {
                file: file.clone(),
                offset: *offset,
                reason: reason.clone(),
            },
            Error::Locked { path } => Error::Locked { path: path.clone() },
            Error::KeyTooLarge { len, max } => Error::KeyTooLarge {
                len: *len,
                max: *max,
            },
            Error::ValueTooLarge { len, max } => Error::ValueTooLarge {
                len: *len,
                max: *max,
            },
            Error::MissingCurrent { dir, files } => Error::MissingCurrent {
                dir: dir.clone(),
                files: files.clone(),
            },
            Error::InvalidArgument(msg) => Error::InvalidArgument(msg.clone()),
            Error::WritesRefused { reason } => Error::WritesRefused {
                reason: reason.clone(),
            },
            Error::Background { reason } => Error::Background {
                reason: reason.clone(),
            },
            Error::ReadOnly => Error::ReadOnly,
            Error::SequenceExhausted { last, count, max } => Error::SequenceExhausted {
                last: *last,
                count: *count,
                max: *max,
            },
            Error::Filter(e) => Error::Filter(e.clone()),
            Error::Conflict { key, current } => Error::Conflict {
                key: key.clone(),
                current: current.clone(),
            },
            Error::NoSuchKeyspace { name } => Error::NoSuchKeyspace { name: name.clone() },
        }
    }

    /// True for the errors that mean stored bytes are damaged.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { context, source } => write!(f, "I/O error while {context}: {source}"),
            Error::Corruption {
                file,
                offset: Some(offset),
                reason,
            } => write!(
                f,
                "corruption in {} at offset {offset}: {reason}",
                file.display()
            ),
            Error::Corruption {
                file,
                offset: None,
                reason,
            } => write!(f, "corruption in {}: {reason}", file.display()),
            Error::Locked { path } => write!(
                f,
                "the store is already open elsewhere: {} is locked",
                path.display()
            ),
            Error::KeyTooLarge { len, max } => {
                write!(f, "key of {len} bytes exceeds the limit of {max} bytes")
            }
            Error::ValueTooLarge { len, max } => {
                write!(f, "value of {len} bytes exceeds the limit of {max} bytes")
            }
            Error::MissingCurrent { dir, files } => write!(
                f,
                "{} holds store files but no CURRENT file ({}): refusing to create a new \
                 store over them (a repair points CURRENT at the newest intact manifest)",
                dir.display(),
                files.join(", ")
            ),
            Error::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            Error::WritesRefused { reason } => {
                write!(
                    f,
                    "the store refuses writes after an earlier failure: {reason}"
                )
            }
            Error::Background { reason } => write!(
                f,
                "background flush or compaction failed (retrying by itself): {reason}"
            ),
            Error::ReadOnly => write!(f, "the store was opened read-only"),
            Error::Conflict { key, .. } => write!(
                f,
                "conflict on key {}: it changed since it was read, or held another value than \
                 expected; nothing was written",
                key.escape_ascii()
            ),
            Error::SequenceExhausted { last, count, max } => write!(
                f,
                "sequence numbers exhausted: a write of {count} entries after {last} would pass \
                 the maximum {max}"
            ),
            Error::Filter(e) => write!(f, "{e}"),
            Error::NoSuchKeyspace { name } => write!(f, "the store has no keyspace {name}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Filter(e) => Some(e),
            _ => None,
        }
    }
}

impl From<FilterError> for Error {
    fn from(e: FilterError) -> Error {
        Error::Filter(e)
    }
}
