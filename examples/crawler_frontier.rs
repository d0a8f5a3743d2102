//! A web crawler's frontier: the queue of URLs still to visit, which must not take a URL it has
//! already seen. Remembering every URL exactly costs memory that grows with the crawl; a Bloom
//! filter remembers them in a fixed ~10 bits each, at the price of dropping a few never-seen
//! URLs (its false positives). It never lets a URL in twice.
//!
//! The crawl is synthetic and deterministic: each page links to a handful of URLs, half of them
//! among a small set of popular pages, so most links are repeats.
//!
//!     cargo run --release --example crawler_frontier
//!     cargo run --release --example crawler_frontier -- --expected 200000   # undersized
//!
//! Options: `--expected N` (URLs the filter is sized for, default 1,000,000), `--rate P`
//! (target false-positive rate, default 0.01), `--pages N` (pages to visit, default 250,000).

use std::collections::{HashSet, VecDeque};
use std::process::ExitCode;

use bloomkv::filter::BloomFilter;

/// Distinct URLs the synthetic web holds.
const WEB_SIZE: u64 = 2_000_000;
/// The popular pages, linked from everywhere.
const POPULAR: u64 = 10_000;
const LINKS_PER_PAGE: u64 = 8;

pub struct Options {
    expected: u64,
    rate: f64,
    pages: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            expected: 1_000_000,
            rate: 0.01,
            pages: 250_000,
        }
    }
}

/// What a crawl prints: its report, line by line, and a warning when the filter was sized for
/// fewer URLs than went in.
pub struct Report {
    pub lines: Vec<String>,
    pub warning: Option<String>,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--expected" => options.expected = value.parse().map_err(|e| bad(&e))?,
            "--rate" => options.rate = value.parse().map_err(|e| bad(&e))?,
            "--pages" => options.pages = value.parse().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(options)
}

/// splitmix64: a deterministic stand-in for "what this page links to".
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn url(page: u64) -> String {
    format!("https://site{}.example/articles/{page}", page % 5_000)
}

/// The pages `page` links to: half popular, half anywhere on the web.
fn links(page: u64) -> impl Iterator<Item = u64> {
    (0..LINKS_PER_PAGE).map(move |i| {
        let r = mix(page.wrapping_mul(LINKS_PER_PAGE) + i);
        if r & 1 == 0 {
            (r >> 1) % POPULAR
        } else {
            (r >> 1) % WEB_SIZE
        }
    })
}

fn main() -> ExitCode {
    match parse_options().and_then(|options| crawl(&options)) {
        Ok(report) => {
            for line in &report.lines {
                println!("{line}");
            }
            if let Some(warning) = &report.warning {
                eprintln!("{warning}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("crawler_frontier: {e}");
            ExitCode::from(2)
        }
    }
}

/// Crawls the synthetic web, keeping the frontier free of URLs the filter has seen.
pub fn crawl(options: &Options) -> Result<Report, String> {
    let mut seen =
        BloomFilter::with_capacity(options.expected, options.rate).map_err(|e| e.to_string())?;
    // Kept only to report how many URLs the filter wrongly dropped; a real crawler would not
    // hold this set (that is the point of the filter).
    let mut truly_seen: HashSet<u64> = HashSet::new();

    let mut frontier: VecDeque<u64> = VecDeque::new();
    let (mut enqueued, mut dropped, mut wrongly_dropped, mut visited) = (0u64, 0u64, 0u64, 0u64);
    let mut offer = |page: u64, frontier: &mut VecDeque<u64>| {
        let key = url(page);
        if seen.contains(key.as_bytes()) {
            dropped += 1;
            if truly_seen.insert(page) {
                wrongly_dropped += 1;
            }
        } else {
            seen.insert(key.as_bytes());
            truly_seen.insert(page);
            frontier.push_back(page);
            enqueued += 1;
        }
    };
    offer(0, &mut frontier);
    while visited < options.pages {
        let Some(page) = frontier.pop_front() else {
            break;
        };
        visited += 1;
        for target in links(page) {
            offer(target, &mut frontier);
        }
    }

    let lines = vec![
        format!("pages visited:        {visited}"),
        format!(
            "URLs offered:         {} (the seed and every link)",
            enqueued + dropped
        ),
        format!("URLs enqueued:        {enqueued}"),
        format!("URLs dropped as seen: {dropped}"),
        format!(
        "  of which never seen (false positives): {wrongly_dropped} ({:.3}% of the URLs offered for the first time)",
        100.0 * wrongly_dropped as f64 / (enqueued + wrongly_dropped).max(1) as f64
    ),
        format!("still in the frontier: {}", frontier.len()),
        format!(
        "filter: {} bytes ({} bits/key, {} hashes), sized for {} URLs, holds {}",
        seen.memory_bytes(),
        seen.bits_per_key(),
        seen.hashes(),
        seen.capacity(),
        seen.len()
    ),
        format!(
        "expected false-positive rate: {:.4}% at capacity, {:.4}% at the current fill",
        100.0 * seen.params().predicted_false_positive_rate(),
        100.0 * seen.expected_false_positive_rate()
    ),
    ];
    let warning = seen.is_over_capacity().then(|| {
        format!(
            "warning: {} URLs went into a filter sized for {}: its false-positive rate is now \
             about {:.2}%, above the {:.2}% it was built for; size it for more URLs",
            seen.len(),
            seen.capacity(),
            100.0 * seen.expected_false_positive_rate(),
            100.0 * options.rate
        )
    });
    Ok(Report { lines, warning })
}
