//! What a `--ycsb` run prints and draws: the load's table and one table per workload, store
//! by store (and operation by operation), with bloomkv's ratio to each other store, then a
//! summary of operations per second; and the chart of operations per second per workload,
//! a bar per store.

use serde_json::Value;

use super::chart::{nice_step, store_color, svg_grid_y, svg_start, svg_text, tick};
use super::table::{memory_limit_text, mib, number, print_table};

fn store_name(s: &Value) -> &str {
    s["store"].as_str().unwrap_or("?")
}

fn stores(doc: &Value) -> &[Value] {
    doc["stores"].as_array().map_or(&[], Vec::as_slice)
}

/// The stores that ran to the end.
fn finished(doc: &Value) -> impl Iterator<Item = &Value> {
    stores(doc).iter().filter(|s| !s["failed"].is_string())
}

/// Store `s`'s figures of workload `letter` (`load` for the load).
fn phase<'a>(s: &'a Value, letter: &str) -> Option<&'a Value> {
    if letter == "load" {
        return s.get("load");
    }
    s["workloads"]
        .as_array()?
        .iter()
        .find(|w| w["workload"].as_str() == Some(letter))
}

/// The phases of a run: `load`, then its workloads in the order they ran.
fn phases(doc: &Value) -> Vec<String> {
    let mut phases = vec!["load".to_string()];
    phases.extend(
        doc["workloads"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(String::from)),
    );
    phases
}

/// "1.23x": `ours` over `theirs`, or `-`.
fn ratio(ours: Option<f64>, theirs: Option<f64>) -> String {
    match (ours, theirs) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    }
}

/// Under a phase's table: bloomkv's operations per second over each other store's.
fn print_ratios(doc: &Value, letter: &str) {
    let ops = |s: &Value| phase(s, letter).and_then(|p| p["ops_per_sec"].as_f64());
    let Some(ours) = finished(doc).find(|s| store_name(s) == "bloomkv") else {
        return;
    };
    for other in finished(doc).filter(|s| store_name(s) != "bloomkv") {
        println!(
            "  bloomkv / {}: {} the operations per second",
            store_name(other),
            ratio(ops(ours), ops(other))
        );
    }
}

pub fn print_report(doc: &Value) {
    let commit = doc["commit"].as_str().unwrap_or("unknown");
    println!(
        "YCSB core workloads: {} records, keys \"user\" + FNV hash, {}-byte random values; {} \
         operations per workload over {} threads; Zipfian constant {}; memory {}; commit {}",
        doc["records"],
        doc["value_size"],
        doc["operations"],
        doc["threads"],
        doc["zipf_constant"],
        memory_limit_text(doc),
        commit,
    );
    println!();
    println!(
        "load: {} inserts over {} threads, one unsynced put per write, timed over the puts; \
         then the memtable flushed and compactions settled (settle s; '-': the store cannot \
         wait for them)",
        doc["records"], doc["threads"]
    );
    let mut rows = Vec::new();
    for s in stores(doc) {
        if let Some(failure) = s["failed"].as_str() {
            rows.push(vec![
                store_name(s).to_string(),
                format!("failed: {failure}"),
            ]);
            continue;
        }
        let l = &s["load"];
        let waited = l["settle"]
            .as_str()
            .is_some_and(|m| !m.contains("not waited"));
        rows.push(vec![
            store_name(s).to_string(),
            number(&l["ops_per_sec"], 0),
            number(&l["p50_us"], 1),
            number(&l["p99_us"], 1),
            number(&l["p999_us"], 1),
            number(&l["seconds"], 1),
            match waited {
                true => number(&l["settle_seconds"], 1),
                false => "-".into(),
            },
            mib(&s["bytes_on_disk"]),
            mib(&s["peak_resident_bytes"]),
            mib(&s["cgroup_peak_bytes"]),
        ]);
    }
    print_table(
        &[
            "store",
            "ops/s",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "load s",
            "settle s",
            "disk MiB (end)",
            "peak RSS MiB",
            "cgroup peak MiB",
        ],
        rows,
    );
    print_ratios(doc, "load");
    for letter in phases(doc).iter().skip(1) {
        print_workload(doc, letter);
    }
    print_summary(doc);
}

/// A workload's table: each store's operations per second and latency, over all its
/// operations and by operation kind.
fn print_workload(doc: &Value, letter: &str) {
    let Some(first) = finished(doc).find_map(|s| phase(s, letter)) else {
        return;
    };
    println!();
    println!(
        "workload {letter}: {}; {} requests",
        first["description"].as_str().unwrap_or("?"),
        first["request_distribution"].as_str().unwrap_or("?"),
    );
    let mut rows = Vec::new();
    for s in finished(doc) {
        let Some(w) = phase(s, letter) else {
            continue;
        };
        let kinds = w["by_operation"].as_object();
        let several = kinds.is_some_and(|k| k.len() > 1);
        rows.push(vec![
            store_name(s).to_string(),
            number(&w["ops_per_sec"], 0),
            number(&w["p50_us"], 1),
            number(&w["p99_us"], 1),
            number(&w["p999_us"], 1),
            w["not_found"].to_string(),
        ]);
        // Each kind of operation under the store, when there are several.
        for (kind, figures) in kinds.into_iter().flatten().filter(|_| several) {
            rows.push(vec![
                format!("  {kind}"),
                number(&figures["ops_per_sec"], 0),
                number(&figures["p50_us"], 1),
                number(&figures["p99_us"], 1),
                number(&figures["p999_us"], 1),
                String::new(),
            ]);
        }
    }
    print_table(
        &[
            "store",
            "ops/s",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "reads not found",
        ],
        rows,
    );
    for s in finished(doc) {
        if let Some(counters) = phase(s, letter).map(|w| &w["store_counters"]) {
            print_background(store_name(s), counters);
        }
    }
    print_ratios(doc, letter);
}

/// What a store that counts it did in the background during a phase.
fn print_background(store: &str, c: &Value) {
    if c.is_null() {
        return;
    }
    let mib = |v: &Value| v.as_u64().unwrap_or(0) as f64 / f64::from(1 << 20);
    println!(
        "  {store} meanwhile: {} flushes, {} compactions ({:.0} MiB read, {:.0} MiB \
         written), writes stalled {:.1} s, {} data blocks gets looked in, {} block cache \
         misses, level 0 {} -> {} tables",
        c["flushes"],
        c["compactions"],
        mib(&c["compaction_bytes_read"]),
        mib(&c["compaction_bytes_written"]),
        c["stall_micros"].as_u64().unwrap_or(0) as f64 / 1e6,
        c["data_block_reads"],
        c["block_cache_misses"],
        c["level0_tables_at_start"],
        c["level0_tables_at_end"],
    );
}

/// Operations per second, workload by workload, a column per store, and bloomkv's ratio to
/// each other store.
fn print_summary(doc: &Value) {
    let names: Vec<&str> = finished(doc).map(store_name).collect();
    if names.is_empty() {
        return;
    }
    let others: Vec<&str> = names.iter().copied().filter(|&n| n != "bloomkv").collect();
    let ours = finished(doc).find(|s| store_name(s) == "bloomkv");
    let ops = |s: &Value, letter: &str| phase(s, letter).and_then(|p| p["ops_per_sec"].as_f64());
    println!();
    println!("operations per second:");
    let mut headers = vec!["phase".to_string()];
    headers.extend(names.iter().map(|n| n.to_string()));
    if ours.is_some() {
        headers.extend(others.iter().map(|n| format!("bloomkv / {n}")));
    }
    let mut rows = Vec::new();
    for letter in phases(doc) {
        let mut row = vec![letter.clone()];
        for s in finished(doc) {
            row.push(ops(s, &letter).map_or("-".into(), |o| format!("{o:.0}")));
        }
        if let Some(ours) = ours {
            for s in finished(doc).filter(|s| store_name(s) != "bloomkv") {
                row.push(ratio(ops(ours, &letter), ops(s, &letter)));
            }
        }
        rows.push(row);
    }
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    print_table(&headers, rows);
}

/// Operations per second per phase (the load, then each workload), a bar per store, each
/// labelled with its figure in thousands.
pub fn chart_svg(doc: &Value) -> String {
    let phases = phases(doc);
    let runs: Vec<&Value> = finished(doc).collect();
    let ops = |s: &Value, letter: &str| phase(s, letter).and_then(|p| p["ops_per_sec"].as_f64());
    let max = runs
        .iter()
        .flat_map(|s| phases.iter().filter_map(|p| ops(s, p)))
        .fold(1.0, f64::max);
    let (w, h, pad, legend_width) = (820.0, 400.0, 70.0, 110.0);
    let right = w - legend_width;
    let step = nice_step(max);
    let top = (max / step).ceil() * step;
    let sy = |v: f64| h - pad - (h - 2.0 * pad) * v / top;
    let mut svg = svg_start(w, h);
    let limit = doc["memory_limit_bytes"]
        .as_u64()
        .map_or("no memory limit".to_string(), |b| {
            format!("held to {} MiB", b >> 20)
        });
    let variant = doc["variant"]
        .as_str()
        .map_or(String::new(), |v| format!("; {v}"));
    svg.push_str(&svg_text(
        pad,
        20.0,
        &format!(
            "YCSB operations/s: {} records of {} bytes, {} operations per workload, {} \
             threads, {limit}{variant}",
            doc["records"], doc["value_size"], doc["operations"], doc["threads"]
        ),
    ));
    for i in 0..=(top / step).round() as u32 {
        let v = f64::from(i) * step;
        let label = match step >= 1000.0 && i > 0 {
            true => format!("{}k", tick(v / 1000.0, step / 1000.0)),
            false => tick(v, step),
        };
        svg.push_str(&svg_grid_y(sy(v), pad, right, &label));
    }
    let group = (right - pad) / phases.len().max(1) as f64;
    let bar = group * 0.8 / runs.len().max(1) as f64;
    for (g, letter) in phases.iter().enumerate() {
        let left = pad + group * g as f64 + group * 0.1;
        for (i, s) in runs.iter().enumerate() {
            let Some(v) = ops(s, letter) else {
                continue;
            };
            let x = left + bar * i as f64;
            let color = store_color(store_name(s));
            svg.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{color}\"/>\n",
                sy(v),
                bar * 0.92,
                h - pad - sy(v),
            ));
            svg.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" text-anchor=\"middle\">{}</text>\n",
                x + bar * 0.46,
                sy(v) - 3.0,
                thousands(v),
            ));
        }
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{letter}</text>\n",
            pad + group * (g as f64 + 0.5),
            h - pad + 16.0,
        ));
    }
    for (i, s) in runs.iter().enumerate() {
        let name = store_name(s);
        svg.push_str(&format!(
            "<text x=\"{:.0}\" y=\"{:.0}\" fill=\"{}\">{name}</text>\n",
            right + 15.0,
            pad + 14.0 * i as f64,
            store_color(name),
        ));
    }
    svg.push_str(&svg_text(
        (pad + right) / 2.0 - 90.0,
        h - pad + 36.0,
        "load, then each workload in the order run",
    ));
    svg.push_str("</svg>\n");
    svg
}

/// `v` in thousands, as a bar's label: "583k", "4.7k".
fn thousands(v: f64) -> String {
    match v < 9_950.0 {
        true => format!("{:.1}k", v / 1000.0),
        false => format!("{:.0}k", v / 1000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run() -> Value {
        let store = |name: &str, a: f64| {
            json!({
                "store": name,
                "load": {"ops_per_sec": 100_000.0, "settle": "x"},
                "workloads": [{"workload": "A", "ops_per_sec": a, "not_found": 0,
                               "by_operation": {"read": {}, "update": {}}}],
            })
        };
        json!({
            "workloads": ["A"], "records": 1000, "value_size": 1000, "operations": 1000,
            "threads": 4, "memory_limit_bytes": null,
            "stores": [store("bloomkv", 300_000.0), store("rocksdb", 200_000.0),
                       {"store": "fjall", "failed": "exit status: 1"}],
        })
    }

    #[test]
    fn the_chart_has_a_bar_per_store_and_phase() {
        let svg = chart_svg(&run());
        assert!(
            svg.starts_with("<svg") && svg.ends_with("</svg>\n"),
            "{svg}"
        );
        // Load and A for the two stores that finished; the failed one has none.
        assert_eq!(svg.matches("<rect x=").count(), 4, "{svg}");
        assert!(
            svg.contains(">300k</text>") && svg.contains(">200k</text>"),
            "{svg}"
        );
        assert!(svg.contains(">bloomkv</text>") && !svg.contains(">fjall</text>"));
        assert_eq!(ratio(Some(300.0), Some(200.0)), "1.50x");
        assert_eq!(ratio(Some(3.0), None), "-");
        assert_eq!(thousands(4657.0), "4.7k");
        assert_eq!(thousands(9960.0), "10k");
    }
}
