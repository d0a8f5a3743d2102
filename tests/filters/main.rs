//! Filters on their own (rates, parameters, partitions, layouts, the classic uses in the examples) and as the store asks them (whole-key and prefix).

#[path = "../common/mod.rs"]
mod common;

mod cache_local_filters;
mod common_lines;
mod db_filters;
mod examples_output;
mod filter_behaviour;
mod filter_fpr;
mod filter_params;
mod filter_partitions;
mod prefix_filters;
mod ribbon_filters;
