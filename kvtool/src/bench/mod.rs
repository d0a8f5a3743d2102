//! `kvtool bench`: how much disk I/O the filters avoid and how fast lookups are, filter setting
//! by filter setting; with `--stores`, whole stores side by side, their lookups or, with
//! `--writes`, their sustained writes.
//!
//! This file only picks the kind of run. Each kind is a module of its own, with its report:
//! - the filter settings: `settings.rs`, `settings_report.rs`, `settings_plot.rs`, and
//!   `peers.rs` for `--peers`;
//! - `--stores`, lookups: `stores.rs`, `stores_report.rs`;
//! - `--stores --writes`: `writes.rs`, `writes_report.rs`, with the stores behind
//!   `write_store.rs` and `peer_writes.rs`;
//! - `--stores --prefix-scans`: `scans.rs`, with RocksDB's scans in `peers.rs`;
//! - `--ycsb`: YCSB's core workloads, `ycsb.rs`, `ycsb_report.rs`, with the stores behind
//!   `ycsb_store.rs` and `peer_ycsb.rs`, and YCSB's keys, request generators and workloads
//!   in `ycsb_generators.rs` and `ycsb_workloads.rs`.
//!
//! Below them is what they share: the options (`args.rs`); the keys, values and lookups of a
//! run (`keys.rs`, `lookup_keys.rs`, `workload.rs`, `figures.rs`); timing, latency histograms
//! and batched lookups (`timing.rs`, `latency_histogram.rs`, `batched.rs`); the child
//! processes of `--stores` and their memory (`children.rs`, `cgroup.rs`, `memory.rs`); report
//! pieces (`table.rs`, `chart.rs`); and the files a run writes (`files.rs`). Imports point one way, from the kinds of run down to what
//! they share, so that any file reads without the ones above it.

mod args;
mod batched;
#[allow(dead_code)]
mod cgroup;
mod chart;
mod children;
mod figures;
mod files;
mod keys;
mod latency_histogram;
mod lookup_keys;
#[allow(dead_code)]
mod memory;
#[cfg(feature = "peers")]
mod peer_writes;
#[cfg(feature = "peers")]
mod peer_ycsb;
#[cfg(feature = "peers")]
mod peers;
mod scans;
mod settings;
mod settings_plot;
mod settings_report;
mod stores;
mod stores_report;
mod table;
mod timing;
mod workload;
mod write_store;
mod writes;
mod writes_report;
mod ycsb;
mod ycsb_generators;
mod ycsb_report;
mod ycsb_store;
mod ycsb_workloads;

pub use args::BenchArgs;

use crate::Failure;

/// Runs the kind of bench `args` asks for.
pub fn run(args: &BenchArgs) -> Result<(), Failure> {
    let dir = args.db.as_deref();
    if let Some(store) = &args.child_store {
        if args.writes {
            return writes::run_child(args, dir, store);
        }
        if args.prefix_scans {
            return scans::run_child(args, dir, store);
        }
        if !args.ycsb.is_empty() {
            return ycsb::run_child(args, dir, store);
        }
        return stores::run_child(args, dir, store);
    }
    files::check_result_paths(args)?;
    if !args.ycsb.is_empty() {
        return ycsb::run(args, dir);
    }
    if args.writes {
        return writes::run(args, dir);
    }
    if args.prefix_scans {
        return scans::run(args, dir);
    }
    if !args.stores.is_empty() {
        return stores::run(args, dir);
    }
    if let (Some(chart), false) = (&args.chart, args.chart_from.is_empty()) {
        return stores_report::chart_from_files(chart, &args.chart_from, args.variant.as_deref());
    }
    if args.memory_limit.is_some() || args.chart.is_some() || args.variant.is_some() {
        return Err(Failure::from(
            "--memory-limit, --chart and --variant apply to store comparisons: add --stores \
             bloomkv,...",
        ));
    }
    settings::run(args, dir)
}
