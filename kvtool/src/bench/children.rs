//! One store per process: how `--stores` runs, for lookups and writes alike. The parent checks
//! the stores, runs `kvtool bench --child-store NAME ...` for each in turn and collects the
//! figures each child writes; a child enters its memory cgroup before it opens its store, so
//! that one store's memory never counts against another's.

use std::path::Path;
use std::process::Command;

use bloomkv::{Db, Options};
use serde_json::{json, Value};

use super::args::{parse_settings, BenchArgs};
use super::cgroup::{CgroupVersion, MemoryCgroup};
use super::memory;
use crate::Failure;

/// Fails unless every store of `stores` is one of `known` and this build can run it. `mode`
/// names the kind of comparison in the message (" with --writes", or nothing).
pub fn check_stores(stores: &[String], known: &[&str], mode: &str) -> Result<(), Failure> {
    for store in stores {
        if !known.contains(&store.as_str()) {
            return Err(Failure::from(format!(
                "unknown store '{store}' in --stores{mode}: use {}",
                known.join(", ")
            )));
        }
        if !store.starts_with("bloomkv") && !cfg!(feature = "peers") {
            return Err(Failure::from(format!(
                "--stores {store} needs kvtool built with `--features peers`"
            )));
        }
    }
    Ok(())
}

/// Runs `kvtool --db TEMP/store-NAME bench ARGS` for each store, one after another, where
/// `args(store, out)` are the arguments that make the child run `store` and write its
/// figures to `out`; returns each child's figures. A child that fails is recorded as
/// `{"store": NAME, "failed": STATUS}` and the others still run. Each store's directory is
/// removed once its child is done.
pub fn run_children(
    stores: &[String],
    temp: &Path,
    args: impl Fn(&str, &Path) -> Vec<String>,
) -> Result<Vec<Value>, Failure> {
    let exe = std::env::current_exe()?;
    let mut runs = Vec::new();
    for store in stores {
        let store_dir = temp.join(format!("store-{store}"));
        let out = temp.join(format!("{store}.json"));
        let mut child = Command::new(&exe);
        child.arg("--db").arg(&store_dir).arg("bench");
        child.args(args(store, &out));
        eprintln!("{store}: running in a process of its own");
        let status = child.status()?;
        let figures = std::fs::read(&out)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
        if let (true, Some(figures)) = (status.success(), figures) {
            runs.push(figures);
        } else {
            // One store failing (out of memory, out of file descriptors) is a result too: record
            // it and go on with the others.
            eprintln!("{store}: failed ({status}); its error is printed above");
            runs.push(json!({"store": store, "failed": status.to_string()}));
        }
        if store_dir.exists() {
            std::fs::remove_dir_all(&store_dir)?;
        }
    }
    Ok(runs)
}

/// The arguments every child takes, whatever it measures: the workload, the store, where
/// its figures go, and the limits.
pub fn child_args(args: &BenchArgs, store: &str, out: &Path) -> Vec<String> {
    let mut v: Vec<String> = [
        "--keys",
        &args.keys.to_string(),
        "--value-size",
        &args.value_size.to_string(),
        "--values",
        args.values.name(),
        "--seed",
        &args.seed.to_string(),
        "--distribution",
        &args.distribution.name(),
        "--load-batch",
        &args.load_batch.to_string(),
        "--child-store",
        store,
        "--child-out",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(out.display().to_string());
    if let Some(limit) = args.memory_limit {
        v.push("--memory-limit".into());
        v.push(limit.to_string());
    }
    if let Some(files) = args.max_open_files {
        v.push("--max-open-files".into());
        v.push(files.to_string());
    }
    if store.starts_with("bloomkv") {
        for (flag, size) in [
            ("--table-size", args.table_size),
            ("--memtable-size", args.memtable_size),
            ("--level1-size", args.level1_size),
            ("--filter-memory-limit", args.filter_memory_limit),
            ("--index-cache-size", args.index_cache_size),
        ] {
            if let Some(bytes) = size {
                v.extend([flag.into(), bytes.to_string()]);
            }
        }
        if args.filter_memory_by_keys {
            v.push("--filter-memory-by-keys".into());
        }
        if args.memory_fixed {
            v.push("--memory-fixed".into());
        }
        if args.spending_on_one_tree {
            v.push("--spending-on-one-tree".into());
        }
        if args.cache_local_filters {
            v.push("--cache-local-filters".into());
        }
        if let Some(level) = args.ribbon_filters_from_level {
            v.extend(["--ribbon-from-level".into(), level.to_string()]);
        }
        for (flag, compression) in [
            ("--compression", args.compression),
            ("--bottom-compression", args.bottom_compression),
        ] {
            if let Some(compression) = compression {
                v.extend([flag.into(), compression.name().into()]);
            }
        }
        if let Some(filter) = &args.filter {
            v.extend([
                "--stores".into(),
                "bloomkv".into(),
                "--filter".into(),
                filter.clone(),
            ]);
        }
    }
    v
}

/// The arguments of a child that times `--lookups` of each kind and no cold ones.
pub fn warm_lookups_only(args: &BenchArgs) -> Vec<String> {
    let lookups = args.lookups.to_string();
    ["--lookups", &lookups, "--cold-lookups", "0"]
        .map(String::from)
        .to_vec()
}

/// A child's run of one store in `dir`: enters the cgroup before the store opens, watches
/// the device under `dir`, takes the figures `measure` returns, adds the store's bytes on
/// disk and the cgroup's figures, and writes them where the parent reads them.
pub fn run_in_child(
    args: &BenchArgs,
    dir: Option<&Path>,
    measure: impl FnOnce(&Path) -> Result<Value, Failure>,
) -> Result<(), Failure> {
    let (Some(dir), Some(out)) = (dir, args.child_out.as_ref()) else {
        return Err(Failure::from("--child-store needs --db and --child-out"));
    };
    let cgroup = enter_cgroup(args.memory_limit)?;
    std::fs::create_dir_all(dir)?;
    super::timing::watch_device_of(dir);
    let mut figures = measure(dir)?;
    figures["bytes_on_disk"] = json!(memory::dir_bytes(dir)?);
    add_cgroup_figures(&mut figures, cgroup.as_ref());
    std::fs::write(out, serde_json::to_string_pretty(&figures)?)?;
    Ok(())
}

/// In a child: moves this process into a memory cgroup of `limit` bytes, when there is one.
pub fn enter_cgroup(limit: Option<u64>) -> Result<Option<MemoryCgroup>, Failure> {
    limit
        .map(|limit| {
            MemoryCgroup::enter(limit).map_err(|e| {
                Failure::from(format!(
                    "cannot hold the run to {limit} bytes of memory: {e}"
                ))
            })
        })
        .transpose()
}

/// Adds what the cgroup saw (its limit, version, peak charge and limit hits) to a child's
/// figures.
pub fn add_cgroup_figures(figures: &mut Value, cgroup: Option<&MemoryCgroup>) {
    if let Some(cgroup) = cgroup {
        figures["memory_limit_bytes"] = json!(cgroup.limit_bytes());
        figures["cgroup_version"] = json!(match cgroup.version() {
            CgroupVersion::V1 => "v1",
            CgroupVersion::V2 => "v2",
        });
        figures["cgroup_peak_bytes"] = json!(cgroup.peak_bytes());
        figures["cgroup_limit_hits"] = json!(cgroup.limit_hits());
    }
}

/// Opens bloomkv in `dir`, with its options described as the store took them: with the
/// filter policy it writes with, which options that give none leave to the store.
pub fn open_bloomkv(dir: &Path, options: Options) -> Result<(Db, String), Failure> {
    let db = Db::open(dir, options.clone())?;
    let described = format!("{:?}", options.filter_policy(db.stats().filter_policy));
    Ok((db, described))
}

/// bloomkv's options in a child: the defaults, with what the command line changed, and the
/// allocator tuned (the child is the store's whole process, as a server's would be).
pub fn bloomkv_options(args: &BenchArgs) -> Result<Options, Failure> {
    let mut options = Options::default().tune_allocator(true);
    if let Some(files) = args.max_open_files {
        options = options.max_open_files(files);
    }
    if let Some(bytes) = args.table_size {
        options = options.table_size(bytes);
    }
    if let Some(bytes) = args.memtable_size {
        options = options.memtable_size(bytes as usize);
    }
    if let Some(bytes) = args.level1_size {
        options = options.level1_size(bytes);
    }
    if let Some(bytes) = args.filter_memory_limit {
        options = options.filter_memory_limit(bytes);
    }
    if let Some(bytes) = args.index_cache_size {
        options = options.index_cache_size(bytes);
    }
    if args.filter_memory_by_keys {
        options = options.filter_memory_follows_lookups(false);
    }
    if args.memory_fixed {
        options = options.memory_follows_reads(false);
    }
    if args.cache_local_filters {
        options = options.cache_local_filters(true);
    }
    if let Some(level) = args.ribbon_filters_from_level {
        options = options.ribbon_filters_from_level(level);
    }
    if let Some(compression) = args.compression {
        options = options.compression(compression);
    }
    if let Some(compression) = args.bottom_compression {
        options = options.bottom_compression(compression);
    }
    if let Some(setting) = &args.filter {
        match parse_settings(setting)?.as_slice() {
            [(_, policy)] => options = options.filter_policy(*policy),
            _ => {
                return Err(Failure::from(
                    "--filter takes one setting, such as budget:10",
                ))
            }
        }
    }
    Ok(options)
}

/// This process's resident memory, now and at its peak.
pub fn resident() -> Result<(u64, u64), Failure> {
    memory::resident_bytes().map_err(Failure::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloomkv::Compression;
    use clap::Parser;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn bench_args(line: &[&str]) -> BenchArgs {
        Command::try_parse_from(std::iter::once("bench").chain(line.iter().copied()))
            .unwrap()
            .bench
    }

    #[test]
    fn memory_fixed_reaches_the_bloomkv_child_and_its_options() {
        let args = bench_args(&["--stores", "bloomkv,rocksdb", "--memory-fixed"]);
        let child = child_args(&args, "bloomkv", Path::new("out.json"));
        assert!(child.iter().any(|a| a == "--memory-fixed"), "{child:?}");
        let in_child: Vec<&str> = child.iter().map(String::as_str).collect();
        let options = bloomkv_options(&bench_args(&in_child)).unwrap();
        assert!(!options.memory_follows_reads);
        // Another store's child never gets it; without the flag memory follows the reads.
        let rocksdb = child_args(&args, "rocksdb", Path::new("out.json"));
        assert!(
            !rocksdb.iter().any(|a| a == "--memory-fixed"),
            "{rocksdb:?}"
        );
        let options = bloomkv_options(&bench_args(&["--stores", "bloomkv"])).unwrap();
        assert!(options.memory_follows_reads);
    }

    #[test]
    fn spending_on_one_tree_reaches_the_bloomkv_child_only() {
        let args = bench_args(&["--stores", "bloomkv,rocksdb", "--spending-on-one-tree"]);
        let child = child_args(&args, "bloomkv", Path::new("out.json"));
        let in_child: Vec<&str> = child.iter().map(String::as_str).collect();
        assert!(bench_args(&in_child).spending_on_one_tree, "{child:?}");
        let rocksdb = child_args(&args, "rocksdb", Path::new("out.json"));
        let in_child: Vec<&str> = rocksdb.iter().map(String::as_str).collect();
        assert!(!bench_args(&in_child).spending_on_one_tree, "{rocksdb:?}");
    }

    #[test]
    fn cache_local_filters_reach_the_bloomkv_child_and_its_options() {
        let args = bench_args(&["--stores", "bloomkv,rocksdb", "--cache-local-filters"]);
        let child = child_args(&args, "bloomkv", Path::new("out.json"));
        let in_child: Vec<&str> = child.iter().map(String::as_str).collect();
        assert!(
            bloomkv_options(&bench_args(&in_child))
                .unwrap()
                .tuning
                .cache_local_filters
        );
        let rocksdb = child_args(&args, "rocksdb", Path::new("out.json"));
        assert!(!rocksdb.iter().any(|a| a == "--cache-local-filters"));
        let plain = bloomkv_options(&bench_args(&["--stores", "bloomkv"])).unwrap();
        assert!(!plain.tuning.cache_local_filters);
    }

    #[test]
    fn the_ribbon_level_reaches_the_bloomkv_child_and_its_options() {
        let args = bench_args(&["--stores", "bloomkv", "--ribbon-from-level", "3"]);
        let child = child_args(&args, "bloomkv", Path::new("out.json"));
        let in_child: Vec<&str> = child.iter().map(String::as_str).collect();
        let options = bloomkv_options(&bench_args(&in_child)).unwrap();
        assert_eq!(options.tuning.ribbon_filters_from_level, 3);
        let plain = bloomkv_options(&bench_args(&["--stores", "bloomkv"])).unwrap();
        assert_eq!(plain.tuning.ribbon_filters_from_level, 1);
    }

    #[test]
    fn compressions_reach_the_bloomkv_child_and_its_options() {
        let line = [
            "--stores",
            "bloomkv,rocksdb",
            "--bottom-compression",
            "zstd",
        ];
        let args = bench_args(&line);
        let child = child_args(&args, "bloomkv", Path::new("out.json"));
        let in_child: Vec<&str> = child.iter().map(String::as_str).collect();
        let options = bloomkv_options(&bench_args(&in_child)).unwrap();
        assert_eq!(options.bottom_compression, Some(Compression::Zstd));
        assert_eq!(options.compression, Compression::Lz4);
        let rocksdb = child_args(&args, "rocksdb", Path::new("out.json"));
        assert!(!rocksdb.iter().any(|a| a == "--bottom-compression"));
        let bad = ["bench", "--stores", "bloomkv", "--compression", "gzip"];
        assert!(Command::try_parse_from(bad).is_err());
    }
}
