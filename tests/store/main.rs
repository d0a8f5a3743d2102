//! The store as a user calls it: reads, cursors, keyspaces, transactions, checkpoints, the write path, errors, and the store against a model.

#[path = "../common/mod.rs"]
mod common;

mod checkpoint;
mod compression;
mod cursor;
mod db_errors;
mod db_model;
mod expiry;
mod handles;
mod keyspaces;
mod range_deletes;
mod read_api;
mod transactions;
mod write_path;
