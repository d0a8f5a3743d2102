//! The text of the store comparisons' reports, `--stores` and `--writes` alike: tables with
//! columns as wide as their cells, figures from a run's JSON, and the memory limit.

use serde_json::Value;

/// Prints `rows` under `headers`, each column as wide as its widest cell, the first column
/// left-aligned and the rest right-aligned.
pub fn print_table(headers: &[&str], rows: Vec<Vec<String>>) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let text: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, &w))| match i {
                0 => format!("{cell:<w$}"),
                _ => format!("{cell:>w$}"),
            })
            .collect();
        println!("  {}", text.join("  "));
    };
    line(headers.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row);
    }
}

/// Bytes in a run's JSON as whole MiB, or `-` where the run has none.
pub fn mib(v: &Value) -> String {
    v.as_f64()
        .map_or("-".into(), |b| format!("{:.0}", b / (1 << 20) as f64))
}

/// A figure of a run's JSON with `digits` decimals, or `-` where the run has none.
pub fn number(v: &Value, digits: usize) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// The memory a run's stores were held to, as its report's first line says it.
pub fn memory_limit_text(doc: &Value) -> String {
    doc["memory_limit_bytes"]
        .as_u64()
        .map_or("not limited".to_string(), |b| {
            format!("held to {} MiB (process and page cache)", b >> 20)
        })
}
