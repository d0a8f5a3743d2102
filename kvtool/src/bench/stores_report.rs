//! What a `--stores` run prints and draws: tables of load, memory and gets, store by store,
//! bloomkv's ratios to the others, its batched lookups, and the chart of gets per second
//! against keys loaded, which also takes earlier runs from their JSON files.

use std::path::Path;

use serde_json::{json, Value};

use super::batched;
use super::chart::{svg_grid_x, svg_grid_y, svg_series, svg_start, svg_text, workload_title};
use super::files::write_result;
use super::table::{memory_limit_text, mib, number, print_table};
use crate::Failure;

/// Draws the chart of earlier runs' JSON files (`--chart` without `--stores`): runs of
/// lookups together, gets per second against keys loaded, or one `--writes` run alone, its
/// puts per second over the load.
pub fn chart_from_files(
    chart: &Path,
    files: &[std::path::PathBuf],
    variant: Option<&str>,
) -> Result<(), Failure> {
    let mut docs = files
        .iter()
        .map(|file| read_run(file))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(variant) = variant {
        docs.iter_mut().for_each(|d| d["variant"] = json!(variant));
    }
    let writes = docs.iter().filter(|d| is_writes_run(d)).count();
    let svg = match (writes, &docs[..]) {
        (0, _) => chart_svg(&docs),
        (1, [one]) => super::writes_report::chart_svg(one),
        _ => {
            return Err(Failure::from(format!(
                "--chart-from draws runs of lookups together, or one --writes run alone; {writes} \
                 of these {} files are --writes runs",
                docs.len()
            )))
        }
    };
    write_result(chart, &svg)
}

/// Whether a run's JSON is that of a `--writes` run.
pub fn is_writes_run(doc: &Value) -> bool {
    doc["benchmark"] == "writes"
}

/// An earlier run's figures, from the JSON file `--json` wrote: a `--stores` run, of lookups
/// or of writes (a settings run's JSON, or any other, is refused: it has no stores to draw).
pub fn read_run(file: &Path) -> Result<Value, Failure> {
    let bytes = std::fs::read(file)
        .map_err(|e| Failure::from(format!("cannot read {}: {e}", file.display())))?;
    let not_a_run = |why: String| {
        Failure::from(format!(
            "{} is not the JSON of a --stores run: {why}",
            file.display()
        ))
    };
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| not_a_run(e.to_string()))?;
    let has_stores = doc["stores"].as_array().is_some_and(|s| !s.is_empty());
    match has_stores && (is_writes_run(&doc) || doc["lookups"].is_u64()) {
        true => Ok(doc),
        false => Err(not_a_run(
            "no stores with lookups or writes in it".to_string(),
        )),
    }
}

pub fn print_report(doc: &Value) {
    println!(
        "store comparison: {} keys of 16 bytes, {}-byte {} values, loaded {}; {} present and {} absent gets each; memory {}",
        doc["keys"],
        doc["value_size"],
        doc["values"].as_str().unwrap_or("?"),
        load_text(doc),
        doc["lookups"],
        doc["lookups"],
        memory_limit_text(doc),
    );
    let empty = Vec::new();
    let stores = doc["stores"].as_array().unwrap_or(&empty);
    for s in stores {
        if let Some(failure) = s["failed"].as_str() {
            println!("  {} failed: {failure}", s["store"].as_str().unwrap_or("?"));
        }
    }
    let ran: Vec<&Value> = stores.iter().filter(|s| s["failed"].is_null()).collect();
    print_overview(&ran);
    for (title, present, absent) in [
        (
            "right after the load's flush (compactions running)",
            "fresh_present",
            "fresh_absent",
        ),
        (
            "after compactions settled (fjall: no way to wait; its one pass)",
            "present",
            "absent",
        ),
    ] {
        println!();
        println!("gets {title}; per get: higher gets/s is better, lower everything else");
        print_gets(&ran, present, absent);
    }
    let Some(ours) = ran.iter().find(|s| s["store"] == "bloomkv") else {
        return;
    };
    print_one_tree(ours);
    batched::print(ours);
    print_ratios(ours, &ran);
}

/// With `--spending-on-one-tree`: the store reopened on its tables, its filter memory spent
/// by the lookups counted and by keys, one row pair each spending.
fn print_one_tree(ours: &Value) {
    let Some(spendings) = ours["one_tree"].as_object() else {
        return;
    };
    let rows: Vec<Value> = (spendings.iter())
        .map(|(name, figures)| {
            let mut row = figures.clone();
            row["store"] = json!(format!("bloomkv, {}", name.replace('_', " ")));
            row
        })
        .collect();
    println!();
    let limit = |name: &str| mib(&spendings[name]["filter_memory_limit_bytes"]);
    println!(
        "gets on the same tables reopened (after a warming pass): filter memory spent by the lookups and by keys at the limit the store ended with ({} MiB), by keys at the limit given ({} MiB)",
        limit("follows_lookups"),
        limit("by_keys_at_given_limit"),
    );
    print_gets(&rows.iter().collect::<Vec<_>>(), "present", "absent");
}

/// Load, memory and disk, one row per store.
fn print_overview(stores: &[&Value]) {
    let rows = stores
        .iter()
        .map(|s| {
            vec![
                s["store"].as_str().unwrap_or("?").to_string(),
                number(&s["load_seconds"], 1),
                number(&s["settle_seconds"], 1),
                number(&s["longest_write_seconds"], 2),
                mib(&s["bytes_on_disk"]),
                mib(&s["resident_bytes"]),
                mib(&s["peak_resident_bytes"]),
                mib(&s["cgroup_peak_bytes"]),
                mib(&metadata_bytes(s, "filter")),
                mib(&metadata_bytes(s, "index")),
                table_files(s),
            ]
        })
        .collect();
    println!();
    print_table(
        &[
            "store",
            "load s",
            "settle s",
            "longest write s",
            "disk MiB",
            "resident MiB",
            "peak MiB",
            "cgroup peak MiB",
            "filter MiB",
            "index MiB",
            "tables",
        ],
        rows,
    );
}

/// A store's filter or index bytes: bloomkv's in memory (an index's resident part and the
/// partitions its index cache holds), RocksDB's blocks summed over its tables (held in memory
/// whole by its default options).
fn metadata_bytes(s: &Value, what: &str) -> Value {
    let ours = &s[format!("{what}_memory_bytes")];
    if ours.is_null() {
        return s[format!("{what}_bytes")].clone();
    }
    let cached = s[format!("{what}_cache_bytes")].as_u64().unwrap_or(0);
    json!(ours.as_u64().map(|bytes| bytes + cached))
}

fn table_files(s: &Value) -> String {
    match s["tables_per_level"].as_array() {
        Some(levels) => levels
            .iter()
            .filter_map(Value::as_u64)
            .sum::<u64>()
            .to_string(),
        None => s["table_files"]
            .as_u64()
            .map_or("-".into(), |n| n.to_string()),
    }
}

/// One pass of gets: rate, latency and per-get work, one row per store and kind of key.
fn print_gets(stores: &[&Value], present: &str, absent: &str) {
    let mut rows = Vec::new();
    for s in stores {
        for (kind, field) in [("present", present), ("absent", absent)] {
            let g = &s[field];
            if g.is_null() {
                continue;
            }
            let blocks = match g["blocks_per_get"].is_null() {
                true => &g["blocks_read_per_get"],
                false => &g["block_cache_misses_per_get"],
            };
            rows.push(vec![
                s["store"].as_str().unwrap_or("?").to_string(),
                kind.to_string(),
                number(&g["gets_per_second"], 0),
                number(&g["p50_us"], 1),
                number(&g["p99_us"], 1),
                number(&g["filters_per_get"], 2),
                number(blocks, 3),
                number(&g["read_calls_per_get"], 3),
                number(&g["device_reads_per_get"], 3),
                number(&kib(&g["device_read_bytes_per_get"]), 2),
                number(&g["file_opens_per_get"], 3),
            ]);
        }
    }
    print_table(
        &[
            "store",
            "keys",
            "gets/s",
            "p50 us",
            "p99 us",
            "filters",
            "blocks read",
            "read calls",
            "device reads",
            "device KiB",
            "file opens",
        ],
        rows,
    );
}

fn kib(v: &Value) -> Value {
    json!(v.as_f64().map(|b| b / 1024.0))
}

/// bloomkv against each other store, for both passes.
fn print_ratios(ours: &Value, stores: &[&Value]) {
    let ratio = |a: &Value, b: &Value| match (a.as_f64(), b.as_f64()) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    };
    let rate = |s: &Value, field: &str| s[field]["gets_per_second"].clone();
    let rows = stores
        .iter()
        .filter(|s| s["store"] != "bloomkv")
        .map(|peer| {
            vec![
                format!("bloomkv / {}", peer["store"].as_str().unwrap_or("?")),
                ratio(&rate(ours, "fresh_present"), &rate(peer, "fresh_present")),
                ratio(&rate(ours, "fresh_absent"), &rate(peer, "fresh_absent")),
                ratio(&rate(ours, "present"), &rate(peer, "present")),
                ratio(&rate(ours, "absent"), &rate(peer, "absent")),
                ratio(&ours["resident_bytes"], &peer["resident_bytes"]),
                ratio(&ours["bytes_on_disk"], &peer["bytes_on_disk"]),
                ratio(&load_and_settle(ours), &load_and_settle(peer)),
            ]
        })
        .collect();
    println!();
    println!(
        "ratios: above 1 means bloomkv is faster for gets/s, larger for memory, disk and time"
    );
    print_table(
        &[
            "",
            "present (fresh)",
            "absent (fresh)",
            "present (settled)",
            "absent (settled)",
            "resident memory",
            "bytes on disk",
            "load + settle time",
        ],
        rows,
    );
}

fn load_and_settle(s: &Value) -> Value {
    let load = s["load_seconds"].as_f64();
    json!(load.map(|l| l + s["settle_seconds"].as_f64().unwrap_or(0.0)))
}

/// (store, keys loaded, present gets/s, absent gets/s).
type ChartPoint = (String, f64, f64, f64);

/// Gets per second against keys loaded, one line per store, present keys on the left and
/// absent keys on the right; both axes logarithmic.
pub fn chart_svg(docs: &[Value]) -> String {
    let mut points: Vec<ChartPoint> = Vec::new();
    for doc in docs {
        let keys = doc["keys"].as_f64().unwrap_or(0.0);
        for s in doc["stores"].as_array().into_iter().flatten() {
            // Settled gets under the store's name; those right after the load, where the
            // run has them, as a series of their own.
            for (suffix, present, absent) in [
                ("", "present", "absent"),
                (
                    " right after load (dashed)",
                    "fresh_present",
                    "fresh_absent",
                ),
            ] {
                if let (Some(name), Some(p), Some(a)) = (
                    s["store"].as_str(),
                    s[present]["gets_per_second"].as_f64(),
                    s[absent]["gets_per_second"].as_f64(),
                ) {
                    points.push((format!("{name}{suffix}"), keys, p, a));
                }
            }
        }
    }
    points.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let (w, h, pad) = (420.0, 320.0, 60.0);
    let span = |f: &dyn Fn(&ChartPoint) -> f64| {
        let lo = points
            .iter()
            .map(f)
            .fold(f64::MAX, f64::min)
            .max(1.0)
            .log10()
            .floor();
        let hi = points.iter().map(f).fold(1.0, f64::max).log10().ceil();
        (lo, hi.max(lo + 1.0))
    };
    let (kx0, kx1) = span(&|p| p.1);
    let (gy0, gy1) = span(&|p| p.2.min(p.3));
    let (_, gy1b) = span(&|p| p.2.max(p.3));
    let gy1 = gy1.max(gy1b);
    let mut svg = svg_start(2.0 * w, h + 20.0);
    svg.push_str(&svg_text(pad, 14.0, &memory_limits_title(docs)));
    svg.push_str("<g transform=\"translate(0,20)\">\n");
    for (panel, title) in [(0usize, "present-key gets/s"), (1, "absent-key gets/s")] {
        let x0 = panel as f64 * w;
        let sx = |k: f64| x0 + pad + (w - 2.0 * pad) * (k.log10() - kx0) / (kx1 - kx0);
        let sy = |g: f64| h - pad - (h - 2.0 * pad) * (g.max(1.0).log10() - gy0) / (gy1 - gy0);
        svg.push_str(&svg_text(
            x0 + pad,
            20.0,
            &format!("{title} against keys loaded (log scales)"),
        ));
        for decade in (kx0 as i32)..=(kx1 as i32) {
            let x = sx(10f64.powi(decade));
            svg.push_str(&svg_grid_x(x, pad, h - pad, &format!("1e{decade}")));
        }
        for decade in (gy0 as i32)..=(gy1 as i32) {
            let y = sy(10f64.powi(decade));
            svg.push_str(&svg_grid_y(
                y,
                x0 + pad,
                x0 + w - pad,
                &format!("1e{decade}"),
            ));
        }
        let mut names: Vec<&str> = points.iter().map(|p| p.0.as_str()).collect();
        names.dedup();
        for (i, name) in names.iter().enumerate() {
            let line: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.0 == *name)
                .map(|p| (sx(p.1), sy(if panel == 0 { p.2 } else { p.3 })))
                .collect();
            let legend = (x0 + pad + 6.0, 40.0 + 14.0 * i as f64);
            let series = svg_series(&line, name, legend, true);
            // Gets right after the load dashed, settled ones solid.
            svg.push_str(&match name.ends_with(" right after load (dashed)") {
                true => series.replace(
                    "stroke-width=\"2\"",
                    "stroke-width=\"2\" stroke-dasharray=\"6,3\"",
                ),
                false => series,
            });
        }
        svg.push_str(&svg_text(
            x0 + w / 2.0 - 30.0,
            h - pad + 32.0,
            "keys loaded",
        ));
    }
    svg.push_str("</g>\n</svg>\n");
    svg
}

/// The chart's title: each run's workload (keys, value size and kind) and the memory it was
/// held to, so that a chart read on its own says what was measured.
fn memory_limits_title(docs: &[Value]) -> String {
    let runs: Vec<String> = docs.iter().map(workload_title).collect();
    format!(
        "{} (each store in its own process, with its page cache)",
        runs.join("; ")
    )
}

/// How a run's load wrote its keys: "one put per write" or "in batches of 1000 puts" (runs
/// recorded before `--load-batch` wrote batches of 1,000).
fn load_text(doc: &Value) -> String {
    match doc["load_batch"].as_u64().unwrap_or(1000) {
        1 => "one put per write".to_string(),
        n => format!("in batches of {n} puts"),
    }
}
