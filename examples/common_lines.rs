//! The lines two large files have in common, in bounded memory.
//!
//! The naive way holds every line of one file in a hash set. This one holds a Bloom filter of
//! FILE_A's lines instead (about 10 bits a line at a 1% rate), streams FILE_B keeping the lines
//! that pass the filter as candidates, then streams FILE_A once more to keep only the candidates
//! that really are in it. Only the candidates (the shared lines plus ~1% false positives of
//! FILE_B) are ever held in memory, never a whole file.
//!
//!     cargo run --release --example common_lines -- FILE_A FILE_B [--rate P]
//!     cargo run --release --example common_lines -- --hashset FILE_A FILE_B
//!     cargo run --release --example common_lines -- --generate DIR N
//!
//! The shared lines are printed once each, in the order they first appear in FILE_B; a summary
//! (counts, filter size, peak memory) goes to stderr. `--generate` writes `DIR/a.txt` and
//! `DIR/b.txt`, N lines each, of which exactly ceil(N / 10) are shared.
//! Lines are compared as bytes; a trailing "\n" or "\r\n" is not part of a line.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bloomkv::filter::BloomFilter;

/// What a filter-based run found, with the figures worth reporting.
pub struct Report {
    /// The shared lines, each once, in the order of their first appearance in FILE_B.
    pub common: Vec<Vec<u8>>,
    pub lines_a: u64,
    pub lines_b: u64,
    /// Distinct lines of FILE_B that passed the filter.
    pub candidates: u64,
    pub filter_bytes: usize,
}

/// Calls `f` with each line of the file at `path`, reusing one buffer. Returns the line count.
pub fn for_each_line(path: &Path, mut f: impl FnMut(&[u8])) -> io::Result<u64> {
    let mut reader = BufReader::with_capacity(1 << 16, File::open(path)?);
    let mut line = Vec::new();
    let mut count = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(count);
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        f(&line);
        count += 1;
    }
}

/// The Bloom-filter way: see the module comment.
pub fn common_lines(a: &Path, b: &Path, rate: f64) -> io::Result<Report> {
    let invalid = |e: bloomkv::filter::FilterError| io::Error::new(io::ErrorKind::InvalidInput, e);
    // Pass 1 counts FILE_A's lines to size the filter; pass 2 fills it.
    let lines_a = for_each_line(a, |_| {})?;
    let mut filter = BloomFilter::with_capacity(lines_a, rate).map_err(invalid)?;
    for_each_line(a, |line| filter.insert(line))?;

    // Pass 3: FILE_B's lines that pass the filter, deduplicated, numbered in order of arrival.
    let mut candidates: HashMap<Vec<u8>, usize> = HashMap::new();
    let lines_b = for_each_line(b, |line| {
        if filter.contains(line) && !candidates.contains_key(line) {
            let next = candidates.len();
            candidates.insert(line.to_vec(), next);
        }
    })?;

    // Pass 4: keep the candidates FILE_A really holds.
    let mut confirmed = vec![false; candidates.len()];
    for_each_line(a, |line| {
        if let Some(&i) = candidates.get(line) {
            confirmed[i] = true;
        }
    })?;
    let candidate_count = candidates.len() as u64;
    let mut common: Vec<(usize, Vec<u8>)> = candidates
        .into_iter()
        .filter(|&(_, i)| confirmed[i])
        .map(|(line, i)| (i, line))
        .collect();
    common.sort_unstable_by_key(|&(i, _)| i);
    Ok(Report {
        common: common.into_iter().map(|(_, line)| line).collect(),
        lines_a,
        lines_b,
        candidates: candidate_count,
        filter_bytes: filter.memory_bytes(),
    })
}

/// The naive way: every line of FILE_A in a hash set. Same output as [`common_lines`].
pub fn common_lines_hashset(a: &Path, b: &Path) -> io::Result<Vec<Vec<u8>>> {
    let mut lines_a: HashSet<Vec<u8>> = HashSet::new();
    for_each_line(a, |line| {
        if !lines_a.contains(line) {
            lines_a.insert(line.to_vec());
        }
    })?;
    let mut common = Vec::new();
    for_each_line(b, |line| {
        // Taking the line out of the set prints each shared line once.
        if let Some(line) = lines_a.take(line) {
            common.push(line);
        }
    })?;
    Ok(common)
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Line `i` of the synthetic data: distinct for every `i`, about 60 bytes, log-like.
pub fn generated_line(i: u64) -> String {
    let h = mix(i);
    format!(
        "{h:016x} user-{:06} GET /catalog/item/{i} ref={:08x}",
        h % 1_000_000,
        (h >> 32) as u32 ^ 0x5bd1_e995
    )
}

/// Writes `dir/a.txt` (lines 0..n) and `dir/b.txt` (n lines: every tenth one among the last
/// ceil(n / 10) lines of a.txt, the others new). Returns the paths and the shared count.
pub fn generate(dir: &Path, n: u64) -> io::Result<(PathBuf, PathBuf, u64)> {
    std::fs::create_dir_all(dir)?;
    let shared = n.div_ceil(10);
    let (a_path, b_path) = (dir.join("a.txt"), dir.join("b.txt"));
    let mut a = BufWriter::new(File::create(&a_path)?);
    for i in 0..n {
        writeln!(a, "{}", generated_line(i))?;
    }
    a.flush()?;
    let mut b = BufWriter::new(File::create(&b_path)?);
    for j in 0..n {
        let i = if j % 10 == 0 {
            n - shared + j / 10
        } else {
            n + j - (j / 10 + 1)
        };
        writeln!(b, "{}", generated_line(i))?;
    }
    b.flush()?;
    Ok((a_path, b_path, shared))
}

/// Peak resident memory of this process (VmHWM), where /proc tells it.
fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn print_lines(lines: &[Vec<u8>]) -> io::Result<()> {
    let mut out = BufWriter::new(io::stdout().lock());
    for line in lines {
        out.write_all(line)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

const USAGE: &str = "usage: common_lines FILE_A FILE_B [--rate P]
       common_lines --hashset FILE_A FILE_B
       common_lines --generate DIR N";

fn run(args: &[String]) -> Result<(), String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["--generate", dir, n] => {
            let n: u64 = n.parse().map_err(|e| format!("N {n}: {e}"))?;
            let (a, b, shared) =
                generate(Path::new(dir), n).map_err(|e| format!("generating in {dir}: {e}"))?;
            eprintln!(
                "wrote {} and {} ({n} lines each, {shared} shared)",
                a.display(),
                b.display()
            );
        }
        ["--hashset", a, b] => {
            let common = common_lines_hashset(Path::new(a), Path::new(b))
                .map_err(|e| format!("reading {a} / {b}: {e}"))?;
            print_lines(&common).map_err(|e| format!("writing: {e}"))?;
            eprintln!("hash set: {} shared lines", common.len());
        }
        [a, b] | [a, b, "--rate", _] => {
            let rate = match args.as_slice() {
                [_, _, _, p] => p.parse().map_err(|e| format!("--rate {p}: {e}"))?,
                _ => 0.01,
            };
            let report = common_lines(Path::new(a), Path::new(b), rate)
                .map_err(|e| format!("reading {a} / {b}: {e}"))?;
            print_lines(&report.common).map_err(|e| format!("writing: {e}"))?;
            eprintln!(
                "filter: {} lines in A, {} in B, {} candidates, {} false candidates, {} shared \
                 lines; filter {} bytes",
                report.lines_a,
                report.lines_b,
                report.candidates,
                report.candidates - report.common.len() as u64,
                report.common.len(),
                report.filter_bytes
            );
        }
        _ => return Err(USAGE.to_string()),
    }
    if let Some(kib) = peak_memory_kib() {
        eprintln!("peak resident memory: {kib} KiB");
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("common_lines: {e}");
            ExitCode::from(2)
        }
    }
}
