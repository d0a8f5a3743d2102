//! What every chart of the store comparisons shares, `--stores`, `--writes` and `--ycsb`
//! alike: the SVG pieces, each store's color, round steps for an axis, and the title that
//! names a run's workload.

use serde_json::Value;

/// A run's keys, values, lookups (when not uniform) and memory limit, as a chart's title
/// names them: "100000000 keys, 100-byte random values, held to 1024 MiB".
pub fn workload_title(doc: &Value) -> String {
    let limit = doc["memory_limit_bytes"]
        .as_u64()
        .map_or("no memory limit".to_string(), |b| {
            format!("held to {} MiB", b >> 20)
        });
    let values = match (doc["value_size"].as_u64(), doc["values"].as_str()) {
        (Some(size), Some(kind)) => format!(", {size}-byte {kind} values"),
        _ => String::new(),
    };
    let lookups = match doc["distribution"].as_str() {
        Some(law) if law != "uniform" => format!(", lookups by {law}"),
        _ => String::new(),
    };
    let load = match doc["load_batch"].as_u64() {
        Some(1) => ", one put per write",
        _ => "",
    };
    let variant = match doc["variant"].as_str() {
        Some(variant) => format!("; {variant}"),
        None => String::new(),
    };
    format!(
        "{} keys{values}{load}{lookups}, {limit}{variant}",
        doc["keys"]
    )
}

/// The color of a store's line on every chart (`--stores` names and the names the stores
/// report for themselves alike).
pub fn store_color(name: &str) -> &'static str {
    // A series such as "bloomkv right after load" takes its store's color.
    let store = name.split_whitespace().next().unwrap_or_default();
    match store.to_ascii_lowercase().as_str() {
        "bloomkv" => "#4a7ab7",
        "rocksdb" => "#c0392b",
        "rocksdb-shape" => "#e67e22",
        "rocksdb-partitioned" => "#8e44ad",
        "fjall" => "#27ae60",
        _ => "#555555",
    }
}

/// The opening of a chart `width` by `height` on white; close it with `</svg>`.
pub fn svg_start(width: f64, height: f64) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    )
}

/// `text` at (x, y).
pub fn svg_text(x: f64, y: f64, text: &str) -> String {
    format!("<text x=\"{x:.0}\" y=\"{y:.0}\">{text}</text>\n")
}

/// A vertical grid line at `x` from `top` to `bottom`, labelled `label` below it.
pub fn svg_grid_x(x: f64, top: f64, bottom: f64, label: &str) -> String {
    format!(
        "<line x1=\"{x:.1}\" y1=\"{top:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" stroke=\"#ddd\"/>\n<text x=\"{:.1}\" y=\"{:.1}\">{label}</text>\n",
        x - 10.0,
        bottom + 15.0
    )
}

/// A horizontal grid line at `y` from `left` to `right`, labelled `label` left of it.
pub fn svg_grid_y(y: f64, left: f64, right: f64, label: &str) -> String {
    format!(
        "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{right:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\n<text x=\"{:.1}\" y=\"{:.1}\">{label}</text>\n",
        left - 50.0,
        y + 4.0
    )
}

/// A store's line through `points` (in the chart's coordinates), in the store's color, with
/// its name in the legend at `legend` and, when `dots`, a dot at each point.
pub fn svg_series(points: &[(f64, f64)], name: &str, legend: (f64, f64), dots: bool) -> String {
    let color = store_color(name);
    let line: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    let mut svg = format!(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>\n<text x=\"{:.0}\" y=\"{:.0}\" fill=\"{color}\">{name}</text>\n",
        line.join(" "),
        legend.0,
        legend.1,
    );
    if dots {
        for (x, y) in points {
            svg.push_str(&format!(
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{color}\"/>\n"
            ));
        }
    }
    svg
}

/// `value`, a multiple of `step`, with as many decimals as `step` needs.
pub fn tick(value: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{value:.decimals$}")
}

/// A round step (1, 2 or 5 times a power of ten) that cuts `0..max` into about five.
pub fn nice_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(1e-9);
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&step| step >= raw)
        .unwrap_or(10.0 * magnitude)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(100.0), 20.0);
        assert_eq!(nice_step(37.0), 10.0);
        assert_eq!(nice_step(180_000.0), 50_000.0);
        assert!((nice_step(0.06) - 0.02).abs() < 1e-12);
        assert_eq!(tick(0.6000000000000001, 0.2), "0.6");
        assert_eq!(tick(150.0, 50.0), "150");
    }
}
