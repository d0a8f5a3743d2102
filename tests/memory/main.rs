//! Memory the store holds and moves: the governor's roles, filter memory within its limit,
//! caches, level 0 compacted once writes rest.

#[path = "../common/mod.rs"]
mod common;

mod caches;
mod filter_memory;
mod governor;
mod level0_at_rest;
