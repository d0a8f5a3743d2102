//! What the filter-settings bench prints and writes: a header before the run, then tables of
//! the shape, the absent keys (overall and level by level), the present keys and the cold
//! lookups, a legend, a verdict per setting, and the JSON of `--json`.

use serde_json::json;

use super::args::BenchArgs;
use super::figures::SettingResult;
use super::workload::memtable_keys;

/// What the bench is about to do, printed before it starts (the rest comes at the end).
pub fn print_header(args: &BenchArgs) {
    println!(
        "bloomkv bench: {} keys of 16 bytes, {}-byte {} values, random order; {} warm and {} cold lookups of each kind",
        args.keys, args.value_size, args.values.name(), args.lookups, args.cold_lookups
    );
    if args.level0_tables > 0 {
        println!(
            "the last {} keys go into {} level-0 tables after compactions settle",
            args.level0_tables * memtable_keys(args),
            args.level0_tables
        );
    }
}

pub fn print_report(args: &BenchArgs, results: &[SettingResult]) {
    // The settings column is as wide as the longest name (`budget:10`, `reads:0.01`, ...).
    let w = results
        .iter()
        .map(|r| r.label.len())
        .chain(["setting".len()])
        .max()
        .unwrap_or(7);
    let setting = "setting";
    println!();
    println!("shape (tables per level, L0 first):");
    for r in results {
        println!(
            "  {:<w$} {:?}   load {:.1} s ({:.0} puts/s), compactions settled {:.1} s later; write amplification {}, writes stalled {:.1} s",
            r.label,
            r.shape,
            r.load_seconds,
            args.keys as f64 / r.load_seconds,
            r.settle_seconds,
            r.write_amplification.map_or("-".into(), |w| format!("{w:.2}")),
            r.stall_seconds,
        );
    }
    println!();
    println!("absent keys (warm); I/O avoided = 1 - reads / tables consulted (what the same tree would read without filters):");
    println!("  {setting:<w$}  bits/key  hashes  filter MiB  predicted fpr  measured fpr  tables/get  reads/get  predicted reads/get  I/O avoided  gets/s    p50 us  p99 us");
    for r in results {
        let a = &r.warm_absent;
        println!(
            "  {:<w$}  {:>8}  {:>6}  {:>10.2}  {:>13}  {:>12}  {:>10.3}  {:>9.4}  {:>19.4}  {:>10.2}%  {:>8.0}  {:>6.2}  {:>6.2}",
            r.label,
            bits_per_key_column(r),
            r.params.map_or("-".into(), |p| p.hashes().to_string()),
            r.filter_memory_bytes as f64 / (1 << 20) as f64,
            predicted_rate(r).map_or("-".into(), |p| format!("{p:.5}")),
            a.measured_rate().map_or("-".into(), |m| format!("{m:.5}")),
            a.tables_per_get(),
            a.reads_per_get(),
            a.predicted_reads / a.lookups as f64,
            100.0 * a.io_avoided(),
            a.gets_per_second,
            a.p50.as_secs_f64() * 1e6,
            a.p99.as_secs_f64() * 1e6,
        );
    }
    println!();
    println!("absent keys (warm), level by level (levels with tables):");
    println!("  {setting:<w$}  level  tables      keys  filter bits/key  probes/get  predicted fpr  measured fpr  false positives");
    for r in results {
        let a = &r.warm_absent;
        for (l, level) in a.levels.iter().enumerate().filter(|(_, l)| l.tables > 0) {
            println!(
                "  {:<w$}  {:>5}  {:>6}  {:>8}  {:>15.2}  {:>10.3}  {:>13}  {:>12}  {:>15}",
                r.label,
                l,
                level.tables,
                level.keys,
                level.bits_per_key(),
                level.absent_probes as f64 / a.lookups.max(1) as f64,
                level
                    .predicted_rate
                    .map_or("-".into(), |p| format!("{p:.5}")),
                level
                    .measured_rate()
                    .map_or("-".into(), |m| format!("{m:.5}")),
                level.false_positives,
            );
        }
    }
    println!();
    println!("present keys (warm):");
    println!("  {setting:<w$}  reads/get  bytes/get  gets/s    p50 us  p99 us");
    for r in results {
        let p = &r.warm_present;
        println!(
            "  {:<w$}  {:>9.4}  {:>9.0}  {:>8.0}  {:>6.2}  {:>6.2}",
            r.label,
            p.reads_per_get(),
            p.bytes_read as f64 / p.lookups as f64,
            p.gets_per_second,
            p.p50.as_secs_f64() * 1e6,
            p.p99.as_secs_f64() * 1e6
        );
    }
    println!();
    println!("cold (table files dropped from the page cache first):");
    println!("  {setting:<w$}  absent reads/get  absent gets/s  absent p99 us  present reads/get  present gets/s  present p99 us");
    for r in results {
        let (a, p) = (&r.cold_absent, &r.cold_present);
        println!(
            "  {:<w$}  {:>16.4}  {:>13.0}  {:>13.1}  {:>17.4}  {:>14.0}  {:>14.1}",
            r.label,
            a.reads_per_get(),
            a.gets_per_second,
            a.p99.as_secs_f64() * 1e6,
            p.reads_per_get(),
            p.gets_per_second,
            p.p99.as_secs_f64() * 1e6
        );
    }
    println!();
    print_legend();
    println!();
    println!("verdict (absent keys, warm):");
    let unfiltered = results.iter().find(|r| r.filter_memory_bytes == 0);
    for r in results {
        println!("  {:<w$}  {}", r.label, verdict(r, unfiltered));
    }
}

/// What the columns mean, and which way is better.
fn print_legend() {
    for line in [
        "legend (lower is better for reads, bytes, latency and memory; higher for gets/s and I/O avoided):",
        "  tables/get     tables whose key range holds the key: the block reads a get costs without filters",
        "  reads/get      data blocks a get read; for absent keys every one is wasted",
        "  I/O avoided    share of the reads without filters that the filters saved",
        "  predicted fpr  false-positive rate the filters' parameters promise; measured fpr: as counted",
        "  bits/key       filter memory per key (a budget's row: the store's average; its levels below)",
        "  p50/p99 us     median and 99th-percentile latency of one get, in microseconds",
        "  shape          tables per level after compactions settled: a deeper tree consults more tables",
    ] {
        println!("{line}");
    }
}

/// One line on what a setting bought, against the setting without filters when the run has one.
fn verdict(r: &SettingResult, unfiltered: Option<&SettingResult>) -> String {
    let a = &r.warm_absent;
    if r.filter_memory_bytes == 0 {
        return format!(
            "no filters: {:.3} block reads per absent get, one per table consulted",
            a.reads_per_get()
        );
    }
    let mut line = format!("{:.1}% of the block reads avoided", 100.0 * a.io_avoided());
    if let (Some(predicted), Some(measured)) = (predicted_rate(r), a.measured_rate()) {
        let off = 100.0 * (measured - predicted) / predicted;
        line +=
            &format!("; measured rate {measured:.5} against {predicted:.5} predicted ({off:+.0}%)");
    }
    if let Some(none) = unfiltered.filter(|n| n.warm_absent.gets_per_second > 0.0) {
        line += &format!(
            "; {:.1}x the gets/s of {}",
            a.gets_per_second / none.warm_absent.gets_per_second,
            none.label
        );
    }
    line += &format!(
        "; {:.2} MiB of filters",
        r.filter_memory_bytes as f64 / (1 << 20) as f64
    );
    line
}

/// A setting's bits per key: its parameters' for one rate, the store's average for a budget.
fn bits_per_key_column(r: &SettingResult) -> String {
    if let Some(p) = r.params {
        return p.bits_per_key().to_string();
    }
    let keys: u64 = r.warm_absent.levels.iter().map(|l| l.keys).sum();
    match r.filter_memory_bytes {
        0 => "-".into(),
        bytes => format!("{:.1}", bytes as f64 * 8.0 / keys.max(1) as f64),
    }
}

/// A setting's predicted false-positive rate: its parameters' for one rate; for a budget, the
/// average over the tables absent keys consulted.
fn predicted_rate(r: &SettingResult) -> Option<f64> {
    if let Some(p) = r.params {
        return Some(p.predicted_false_positive_rate());
    }
    let a = &r.warm_absent;
    (r.filter_memory_bytes > 0 && a.tables_consulted > 0)
        .then(|| a.predicted_reads / a.tables_consulted as f64)
}

pub fn results_json(args: &BenchArgs, results: &[SettingResult]) -> serde_json::Value {
    let settings: Vec<_> = results
        .iter()
        .map(|r| {
            json!({
                "setting": r.label,
                "bits_per_key": r.params.map(|p| p.bits_per_key()),
                "hashes": r.params.map(|p| p.hashes()),
                "predicted_false_positive_rate": r.params.map(|p| p.predicted_false_positive_rate()),
                "filter_memory_bytes": r.filter_memory_bytes,
                "load_seconds": r.load_seconds,
                "settle_seconds": r.settle_seconds,
                "write_amplification": r.write_amplification,
                "stall_seconds": r.stall_seconds,
                "tables_per_level": r.shape,
                "warm": {"present": r.warm_present.to_json(), "absent": r.warm_absent.to_json()},
                "cold": {"present": r.cold_present.to_json(), "absent": r.cold_absent.to_json()},
            })
        })
        .collect();
    json!({
        "keys": args.keys, "key_size": 16, "value_size": args.value_size, "values": args.values.name(),
        "lookups": args.lookups, "cold_lookups": args.cold_lookups, "seed": args.seed,
        "distribution": args.distribution.name(),
        "memtable_size": args.memtable_size, "level1_size": args.level1_size,
        "table_size": args.table_size, "level0_tables": args.level0_tables,
        "settings": settings,
    })
}
