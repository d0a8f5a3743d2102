//! The help headings that more than one part of the command line uses. A leaf module:
//! `cli.rs` and the bench harness's options (`bench/args.rs`) both name these headings, and
//! neither has to import the other for them.

/// The help heading of the options several commands share.
pub const COMMON: &str = "Common options";
