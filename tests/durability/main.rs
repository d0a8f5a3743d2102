//! What survives: crashes, power loss, WAL recovery, injected I/O faults, and a store opened twice or read-only.

#[path = "../common/mod.rs"]
mod common;

mod crash_long;
mod db_crash;
mod hardening;
mod io_faults;
mod power_loss;
mod range_crash;
mod transactions_crash;
mod wal_recovery;
