//! What a `--writes` run prints and draws: a table of the load phase and one of the synced
//! phase, store by store, and the chart of puts per second over the load.

use serde_json::Value;

use super::chart::{
    nice_step, svg_grid_x, svg_grid_y, svg_series, svg_start, svg_text, tick, workload_title,
};
use super::table::{memory_limit_text, mib, number};

fn store_name(s: &Value) -> &str {
    s["store"].as_str().unwrap_or("?")
}

fn seconds(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        v => number(v, 1),
    }
}

pub fn print_report(doc: &Value) {
    println!(
        "sustained writes: {} keys of 16 bytes, {}-byte {} values, in random order; memory {}",
        doc["keys"],
        doc["value_size"],
        doc["values"].as_str().unwrap_or("?"),
        memory_limit_text(doc),
    );
    let empty = Vec::new();
    let stores = doc["stores"].as_array().unwrap_or(&empty);
    println!();
    println!("load: one thread, one unsynced put per write; then a flush (load s ends there), then until compactions settled (settle s; '-': the store cannot wait for them)");
    println!("  puts/s counts load and settle; write amp = bytes written / {} bytes of keys and values: the store's own count, and the kernel's (write_bytes)", doc["user_bytes"]);
    println!(
        "  {:<13} {:>8} {:>12} {:>8} {:>9} {:>8} {:>14} {:>7} {:>9} {:>13} {:>13} {:>16}",
        "store",
        "puts/s",
        "load puts/s",
        "load s",
        "settle s",
        "stall s",
        "write amp own",
        "kernel",
        "files MiB",
        "allocated MiB",
        "peak RSS MiB",
        "cgroup peak MiB"
    );
    for s in stores {
        if let Some(failure) = s["failed"].as_str() {
            println!("  {:<13} failed: {failure}", store_name(s));
            continue;
        }
        let l = &s["load"];
        println!(
            "  {:<13} {:>8} {:>12} {:>8} {:>9} {:>8} {:>14} {:>7} {:>9} {:>13} {:>13} {:>16}",
            store_name(s),
            number(&l["puts_per_second"], 0),
            number(&l["load_puts_per_second"], 0),
            number(&l["load_seconds"], 1),
            seconds(&l["settle_seconds"]),
            seconds(&l["stall_seconds"]),
            number(&l["write_amplification"], 2),
            number(&l["kernel_write_amplification"], 2),
            mib(&l["bytes_on_disk"]),
            mib(&l["bytes_allocated_on_disk"]),
            mib(&s["peak_resident_bytes"]),
            mib(&s["cgroup_peak_bytes"]),
        );
    }
    let threads: Vec<u64> = doc["writer_threads"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect();
    if doc["synced_keys"].as_u64().unwrap_or(0) == 0 || threads.is_empty() {
        return;
    }
    let first = threads[0];
    println!();
    println!(
        "synced: {} keys per thread count, shared among the threads, one synced put per write, a fresh store each",
        doc["synced_keys"]
    );
    println!(
        "  {:<13} {:>8} {:>9} {:>9} {:>7} {:>8} {:>18} {:>15}",
        "store",
        "threads",
        "puts/s",
        format!("vs {first}"),
        "p50 us",
        "p99 us",
        "writes/log append",
        "kernel KiB/put"
    );
    for s in stores {
        if s["failed"].is_string() {
            continue;
        }
        let runs = s["synced"].as_array().unwrap_or(&empty);
        let base = runs
            .iter()
            .find(|r| r["threads"].as_u64() == Some(first))
            .and_then(|r| r["puts_per_second"].as_f64());
        for r in runs {
            let ratio = match (r["puts_per_second"].as_f64(), base) {
                (Some(p), Some(b)) if b > 0.0 => format!("{:.2}x", p / b),
                _ => "-".into(),
            };
            println!(
                "  {:<13} {:>8} {:>9} {:>9} {:>7} {:>8} {:>18} {:>15}",
                store_name(s),
                r["threads"].as_u64().unwrap_or(0),
                number(&r["puts_per_second"], 0),
                ratio,
                number(&r["p50_us"], 0),
                number(&r["p99_us"], 0),
                number(&r["batches_per_write_group"], 2),
                r["kernel_write_bytes_per_put"]
                    .as_f64()
                    .map_or("-".into(), |b| format!("{:.1}", b / 1024.0)),
            );
        }
    }
}

/// Puts per second over the load, one line per store: each point the puts of one sampling
/// interval (about a second) over its length, at the interval's middle.
pub fn chart_svg(doc: &Value) -> String {
    let mut lines: Vec<(&str, Vec<(f64, f64)>)> = Vec::new();
    for s in doc["stores"].as_array().into_iter().flatten() {
        let samples: Vec<(f64, f64)> = s["load"]["timeline"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p[0].as_f64()?, p[1].as_f64()?)))
            .collect();
        let rate = |w: &[(f64, f64)]| {
            let seconds = (w[1].0 - w[0].0).max(1e-9);
            ((w[0].0 + w[1].0) / 2.0, (w[1].1 - w[0].1) / seconds)
        };
        // The last interval may be a sliver of a second, too short to mean anything: left
        // out, unless it is the only one.
        let mut rates: Vec<(f64, f64)> = samples
            .windows(2)
            .filter(|w| w[1].0 - w[0].0 >= 0.2)
            .map(rate)
            .collect();
        if rates.is_empty() {
            rates = samples.windows(2).map(rate).collect();
        }
        if !rates.is_empty() {
            lines.push((store_name(s), rates));
        }
    }
    // The legend takes a column right of the plot.
    let (w, h, pad, legend_width) = (800.0, 380.0, 70.0, 120.0);
    let right = w - legend_width;
    let max_t = lines
        .iter()
        .flat_map(|(_, l)| l.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let max_rate = lines
        .iter()
        .flat_map(|(_, l)| l.iter().map(|p| p.1))
        .fold(1.0, f64::max);
    let (t_step, rate_step) = (nice_step(max_t), nice_step(max_rate));
    let (t_end, rate_end) = (
        (max_t / t_step).ceil() * t_step,
        (max_rate / rate_step).ceil() * rate_step,
    );
    let sx = |t: f64| pad + (right - pad) * t / t_end;
    let sy = |r: f64| h - pad - (h - 2.0 * pad) * r / rate_end;
    let mut svg = svg_start(w, h);
    svg.push_str(&svg_text(
        pad,
        20.0,
        &format!(
            "puts/s during the load: {}; one thread, one unsynced put per write",
            workload_title(doc)
        ),
    ));
    for i in 0..=(t_end / t_step).round() as u32 {
        let t = f64::from(i) * t_step;
        svg.push_str(&svg_grid_x(sx(t), pad, h - pad, &tick(t, t_step)));
    }
    for i in 0..=(rate_end / rate_step).round() as u32 {
        let r = f64::from(i) * rate_step;
        let label = if rate_step >= 1000.0 && i > 0 {
            format!("{}k", tick(r / 1000.0, rate_step / 1000.0))
        } else {
            tick(r, rate_step)
        };
        svg.push_str(&svg_grid_y(sy(r), pad, right, &label));
    }
    for (i, (name, rates)) in lines.iter().enumerate() {
        let points: Vec<(f64, f64)> = rates.iter().map(|&(t, r)| (sx(t), sy(r))).collect();
        let legend = (right + 15.0, pad + 14.0 * i as f64);
        // Dots only where there are few points: a short load has too few for a line.
        svg.push_str(&svg_series(&points, name, legend, points.len() <= 40));
    }
    svg.push_str(&svg_text(
        (pad + right) / 2.0 - 80.0,
        h - pad + 32.0,
        "seconds since the load began",
    ));
    svg.push_str("</svg>\n");
    svg
}
