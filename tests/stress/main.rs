//! Many threads at once: readers and writers against a model, and SIGKILLs and power cuts under mixed operations.

#[path = "../common/mod.rs"]
mod common;

mod db_concurrency;
mod db_stress;
mod stress;
