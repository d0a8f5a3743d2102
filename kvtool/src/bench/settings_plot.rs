//! The SVG chart of the filter-settings bench (`--plot`): reads per absent get for each
//! setting, the measured false-positive rate against the predicted one, and reads per absent
//! get against filter memory, with labels placed so that they do not overlap.

use super::figures::SettingResult;

/// Two charts side by side: absent-key data-block reads per get for each setting, and the
/// measured false-positive rate against the predicted one by bits per key (log scale).
pub fn plot_svg(results: &[SettingResult]) -> String {
    let (w, h, pad) = (420.0, 300.0, 50.0);
    // Below the panels, room for the slanted setting names.
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"11\">\n",
        3.0 * w,
        h + 30.0
    );
    svg.push_str("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    // Left: bars of reads per absent get.
    let max_reads = results
        .iter()
        .map(|r| r.warm_absent.reads_per_get())
        .fold(0.0, f64::max)
        .max(1e-9);
    let bar_w = (w - 2.0 * pad) / results.len() as f64;
    svg.push_str(&format!(
        "<text x=\"{pad}\" y=\"20\">data-block reads per absent-key get</text>\n"
    ));
    for (i, r) in results.iter().enumerate() {
        let v = r.warm_absent.reads_per_get();
        let bh = (h - 2.0 * pad) * v / max_reads;
        let x = pad + i as f64 * bar_w + 4.0;
        let y = h - pad - bh;
        // Setting names and values are written slanted, ending under (or above) their bar's
        // middle, so that names longer than a bar is wide ("budget:10") do not run into the
        // next one.
        let middle = x + (bar_w - 8.0) / 2.0;
        let (name_y, value_y) = (h - pad + 12.0, y - 4.0);
        svg.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"#4a7ab7\"/>\n\
             <text x=\"{middle:.1}\" y=\"{name_y:.1}\" text-anchor=\"end\" \
             transform=\"rotate(-35 {middle:.1} {name_y:.1})\">{}</text>\n\
             <text x=\"{middle:.1}\" y=\"{value_y:.1}\" font-size=\"9\" \
             transform=\"rotate(-35 {middle:.1} {value_y:.1})\">{v:.4}</text>\n",
            bar_w - 8.0,
            r.label,
        ));
    }
    // Right: measured vs predicted rate, log10 scale, by bits per key.
    let points: Vec<(f64, f64, f64)> = results
        .iter()
        .filter_map(|r| {
            let p = r.params?;
            Some((
                p.bits_per_key() as f64,
                p.predicted_false_positive_rate(),
                r.warm_absent.measured_rate()?,
            ))
        })
        .collect();
    let x0 = w + pad;
    svg.push_str(&format!(
        "<text x=\"{x0}\" y=\"20\">false-positive rate (log scale) by bits per key</text>\n<text x=\"{x0}\" y=\"36\"><tspan fill=\"#4a7ab7\">o predicted</tspan>  <tspan fill=\"#c0392b\">x measured</tspan></text>\n<text x=\"{:.1}\" y=\"{:.1}\">bits per key</text>\n",
        x0 + (w - 2.0 * pad) / 2.0 - 30.0,
        h - pad + 30.0
    ));
    if !points.is_empty() {
        let max_bits = points.iter().map(|p| p.0).fold(0.0, f64::max) + 2.0;
        let lo = points
            .iter()
            .map(|p| p.1.min(p.2.max(1e-7)))
            .fold(1.0, f64::min)
            .log10()
            .floor();
        let sx = |b: f64| x0 + (w - 2.0 * pad) * b / max_bits;
        let sy = |r: f64| pad + (h - 2.0 * pad) * (r.max(1e-7).log10() / lo).clamp(0.0, 1.0);
        // Ticks along the bits-per-key axis, every 2 bits (every 4 past 24).
        let step = if max_bits > 24.0 { 4 } else { 2 };
        for bits in (0..=max_bits as u32).step_by(step) {
            let x = sx(f64::from(bits));
            svg.push_str(&format!(
                "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#999\"/>\n\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{bits}</text>\n",
                h - pad,
                h - pad + 4.0,
                h - pad + 15.0
            ));
        }
        for (bits, predicted, measured) in &points {
            svg.push_str(&format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"none\" stroke=\"#4a7ab7\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#c0392b\" text-anchor=\"middle\">x</text>\n<text x=\"{:.1}\" y=\"{:.1}\">{bits} bits</text>\n",
                sx(*bits), sy(*predicted), sx(*bits), sy(*measured) + 4.0, sx(*bits) + 8.0, sy(*predicted)
            ));
        }
        for decade in (lo as i32)..=0 {
            let y = sy(10f64.powi(decade));
            svg.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{y:.1}\">1e{decade}</text>\n",
                x0 - 40.0
            ));
        }
    }
    plot_reads_against_memory(&mut svg, results, 2.0 * w, w, h, pad);
    svg.push_str("</svg>\n");
    svg
}

/// Places point labels of an 11-pixel font so that none overlaps one placed before, where a
/// place around the point allows.
struct LabelPlacer {
    /// (left, top, right, bottom) of each label placed.
    boxes: Vec<(f64, f64, f64, f64)>,
    /// No label's right end goes past this, where a place on the left allows.
    right: f64,
}

impl LabelPlacer {
    /// Where to write `text` (its baseline's left end) for the point at (`x`, `y`): right
    /// of it above, right below, left above, left below, or further above and below; the
    /// first of these that meets no label placed before (the first, if all do).
    fn place(&mut self, x: f64, y: f64, text: &str) -> (f64, f64) {
        let width = 6.5 * text.chars().count() as f64;
        let candidates = [
            (x + 5.0, y - 6.0),
            (x + 5.0, y + 14.0),
            (x - 5.0 - width, y - 6.0),
            (x - 5.0 - width, y + 14.0),
            (x + 5.0, y - 18.0),
            (x + 5.0, y + 26.0),
        ];
        let box_of = |(lx, ly): (f64, f64)| (lx, ly - 10.0, lx + width, ly + 2.0);
        let meets = |a: (f64, f64, f64, f64), b: &(f64, f64, f64, f64)| {
            a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
        };
        let fits = |c: (f64, f64)| c.0 + width <= self.right;
        let free = |c: (f64, f64)| !self.boxes.iter().any(|b| meets(box_of(c), b));
        let chosen = (candidates.iter().copied())
            .find(|&c| fits(c) && free(c))
            .or_else(|| candidates.iter().copied().find(|&c| free(c)))
            .unwrap_or(candidates[0]);
        self.boxes.push(box_of(chosen));
        chosen
    }
}

/// A chart at `x0`: reads per absent-key get (log scale) against filter memory, one line for
/// uniform rates and one for budgets, each point labelled with its setting.
fn plot_reads_against_memory(
    svg: &mut String,
    results: &[SettingResult],
    x0: f64,
    w: f64,
    h: f64,
    pad: f64,
) {
    let point = |r: &SettingResult| {
        let reads = r.warm_absent.reads_per_get();
        (r.filter_memory_bytes > 0 && reads > 0.0)
            .then(|| (r.filter_memory_bytes as f64 / (1 << 20) as f64, reads))
    };
    // (memory MiB, reads per get, setting) of one series.
    type Points<'r> = Vec<(f64, f64, &'r str)>;
    let series: Vec<(&str, &str, Points)> = [
        ("uniform rate", "#4a7ab7", false),
        ("budget", "#c0392b", true),
    ]
    .into_iter()
    .map(|(name, colour, budget)| {
        let mut points: Vec<(f64, f64, &str)> = results
            .iter()
            .filter(|r| (r.label.starts_with("budget:") || r.label.starts_with("reads:")) == budget)
            .filter_map(|r| point(r).map(|(x, y)| (x, y, r.label.as_str())))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        (name, colour, points)
    })
    .collect();
    let all = || series.iter().flat_map(|(_, _, p)| p.iter());
    svg.push_str(&format!(
        "<text x=\"{:.1}\" y=\"20\">reads per absent get (log scale) against filter MiB</text>\n",
        x0 + pad
    ));
    if all().next().is_none() {
        return;
    }
    let max_x = all().map(|p| p.0).fold(0.0, f64::max) * 1.1;
    let (lo, hi) = all().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(p.1.log10()), hi.max(p.1.log10()))
    });
    let (lo, hi) = (lo.floor(), hi.ceil().max(lo.floor() + 1.0));
    let sx = |x: f64| x0 + pad + (w - 2.0 * pad) * x / max_x;
    let sy = |y: f64| h - pad - (h - 2.0 * pad) * (y.log10() - lo) / (hi - lo);
    for decade in (lo as i32)..=(hi as i32) {
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\">1e{decade}</text>\n",
            x0 + 5.0,
            sy(10f64.powi(decade))
        ));
    }
    svg.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\">filter MiB (0 to {max_x:.2})</text>\n",
        x0 + w / 2.0 - 40.0,
        h - pad + 30.0
    ));
    let mut placed = LabelPlacer {
        boxes: Vec::new(),
        right: x0 + w,
    };
    for (i, (name, colour, points)) in series.iter().enumerate() {
        let path: Vec<String> = points
            .iter()
            .map(|p| format!("{:.1},{:.1}", sx(p.0), sy(p.1)))
            .collect();
        svg.push_str(&format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\">{name}</text>\n",
            path.join(" "),
            x0 + w - pad - 80.0,
            36.0 + 14.0 * i as f64
        ));
        // Points of the two series may lie close together: each label takes the first place
        // around its point that no label placed before overlaps.
        for (x, y, label) in points {
            let (px, py) = (sx(*x), sy(*y));
            let (lx, ly) = placed.place(px, py, label);
            svg.push_str(&format!(
                "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3\" fill=\"{colour}\"/>\n<text x=\"{lx:.1}\" y=\"{ly:.1}\" fill=\"{colour}\">{label}</text>\n"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LabelPlacer;

    /// Labels of points that lie together take places that do not overlap, and keep within
    /// the chart's right edge where a place on the left allows.
    #[test]
    fn labels_of_close_points_do_not_overlap() {
        let mut placer = LabelPlacer {
            boxes: Vec::new(),
            right: 200.0,
        };
        let first = placer.place(100.0, 100.0, "budget:6");
        let second = placer.place(101.0, 101.0, "budget:7");
        let third = placer.place(102.0, 99.0, "0.01");
        assert_ne!(first, second);
        let boxes = &placer.boxes;
        for (i, a) in boxes.iter().enumerate() {
            for b in &boxes[i + 1..] {
                let overlap = a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3;
                assert!(!overlap, "{a:?} and {b:?} ({first:?} {second:?} {third:?})");
            }
        }
        let near_edge = placer.place(190.0, 20.0, "reads:0.0001");
        assert!(near_edge.0 + 6.5 * 12.0 <= 200.0, "{near_edge:?}");
    }
}
