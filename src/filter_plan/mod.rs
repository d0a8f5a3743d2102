//! The filter plan: how the filters' memory is spent over the tables, apart from the tables
//! themselves (`docs/design.md`, "Filter memory").
//!
//! - `shape`: how often lookups reach each level and table, as the tree's shape predicts it;
//!   the budget that writes a table's filter and the plan below both read it.
//! - `fit`: which unit of each table's filter is held whole, folded or dropped for all of them
//!   to fit the filters' share, by each unit's share of the lookups, predicted or counted.
//! - `inherit`: the lookup counts a compaction's outputs take over from its inputs, and a
//!   reopened store's tables from the counts saved when it closed.
//! - `counts`: the span of lookups each table's counts were counted over, their halving.
//! - `saved`: the `LOOKUPS` file those counts are saved in.
//!
//! A table only counts the lookups that asked each unit of its filter for a key it does not
//! hold; what a count is worth is judged here. What the filters' share is, the memory
//! governor says (`crate::memory`).

mod counts;
mod fit;
mod inherit;
pub mod saved;
mod shape;

pub(crate) use counts::CountSpans;
pub(crate) use fit::{fit_filters, load_filters, refit_plan, Change};
pub(crate) use inherit::{inherit_lookup_counts, restore_lookup_counts};
pub use saved::TableLookups;
pub(crate) use shape::{filter_groups, table_shares, Span};
