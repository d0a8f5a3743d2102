//! Memory the store holds and moves: filter memory within its limit, caches, level 0
//! compacted once writes rest.

#[path = "../common/mod.rs"]
mod common;

mod caches;
mod filter_memory;
mod level0_at_rest;
