//! On-disk formats read and written: tables, their indexes and blocks, old format versions, damaged and hostile files, repair.

#[path = "../common/mod.rs"]
mod common;

mod corruption;
mod hostile_input;
mod index_size;
mod repair;
mod sstable;
mod table_format;
mod two_level_index;
