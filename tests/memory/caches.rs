//! The read path's two caches seen from a store: the block cache (bounded in bytes, counted,
//! shareable between stores, resistant to scans, bypassed by compaction, off at size 0) and
//! the table cache (a store with far more tables than `max_open_files` stays correct), and a
//! table file truncated under a running store (errors, never a panic or a signal).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomkv::filename::{parse_file_name, FileKind};
use bloomkv::{BlockCache, BlockCacheStats, Db, Error, Options, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// A 100-byte value for key `i`, version `v`: letters that LZ4 cannot shrink much, so a
/// table's decoded blocks are about as large as its file.
fn value(i: u64, v: u64) -> Vec<u8> {
    let mut x = i
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(v.wrapping_mul(0xbf58_476d_1ce4_e5b9))
        | 1;
    let mut out = format!("{i}-{v}-").into_bytes();
    while out.len() < 100 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(b'a' + (x % 26) as u8);
    }
    out
}

fn fill(db: &Db, keys: std::ops::Range<u64>, v: u64) {
    for i in keys {
        db.put(key(i), value(i, v)).unwrap();
    }
}

/// Numbers of the table files in `dir`.
fn table_files(dir: &Path) -> BTreeSet<u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(
            |e| match parse_file_name(&e.unwrap().file_name().to_string_lossy()) {
                Some(FileKind::Table(n)) => Some(n),
                _ => None,
            },
        )
        .collect()
}

fn live_tables(db: &Db) -> BTreeSet<u64> {
    db.stats().tables.iter().map(|t| t.number).collect()
}

fn scan(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter().collect::<Result<_>>().unwrap()
}

fn model_pairs(model: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    model.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

// ---------------------------------------------------------------------------------------
// Block cache.

#[test]
fn block_cache_stays_within_its_bound_and_counts_every_lookup() {
    const CAPACITY: u64 = 256 << 10;
    const N: u64 = 20_000;
    const GETS: u64 = 5_000;
    let dir = tempfile::tempdir().unwrap();
    let options = Options::default()
        .block_cache_size(CAPACITY)
        .memtable_size(512 << 10)
        .table_size(512 << 10);
    let db = Db::open(dir.path(), options).unwrap();
    fill(&db, 0..N, 0);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let s = db.stats();
    assert!(s.tables.len() >= 3, "{} tables", s.tables.len());
    assert!(s.table_bytes() > 8 * CAPACITY, "{} bytes", s.table_bytes());
    // Flushes and compactions neither ask nor fill the block cache.
    let mut untouched = BlockCacheStats::default();
    untouched.capacity = CAPACITY;
    assert_eq!(s.block_cache, untouched);

    let mut rng = SmallRng::seed_from_u64(0xb10c);
    for _ in 0..GETS {
        let i = rng.gen_range(0..N);
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 0)), "key {i}");
        let c = db.stats().block_cache;
        assert!(c.bytes <= c.capacity, "{c:?}");
    }
    let s = db.stats();
    let c = s.block_cache;
    println!(
        "after {GETS} random gets: {c:?}, hit rate {:?}",
        c.hit_rate()
    );
    assert_eq!(c.capacity, CAPACITY);
    assert!(c.bytes <= CAPACITY);
    assert!(c.bytes > CAPACITY / 2, "the cache filled up: {c:?}");
    assert!(c.evictions > 0, "{c:?}");
    assert!(c.hits > 0 && c.misses > 0, "{c:?}");
    // Every data block a point lookup visited was one cache lookup (the memtable is empty,
    // so every get reached at least one table). `data_block_reads` counts the blocks lookups
    // visited, cache hits included.
    assert_eq!(c.hits + c.misses, s.data_block_reads, "{c:?} vs {s:?}");
    assert!(c.hits + c.misses >= GETS);
    // Nothing else reads: each miss read its block and cached it; each cached block is still
    // there or was evicted.
    assert_eq!(c.inserts, c.misses, "{c:?}");
    assert_eq!(c.blocks, c.inserts - c.evictions, "{c:?}");
    assert!(c.blocks > 0);

    // A key just read reads again from the cache alone.
    let i = rng.gen_range(0..N);
    let before = db.stats().block_cache;
    assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 0)));
    let first = db.stats().block_cache;
    assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 0)));
    let second = db.stats().block_cache;
    let visited = (first.hits + first.misses) - (before.hits + before.misses);
    assert!(visited >= 1);
    assert_eq!(second.misses, first.misses, "second get of key {i} missed");
    assert_eq!(second.hits, first.hits + visited);
    assert_eq!(second.inserts, first.inserts);
}

#[test]
fn one_block_cache_shared_by_two_stores_keeps_their_blocks_apart() {
    const N: u64 = 3_000;
    let cache = Arc::new(BlockCache::new(8 << 20));
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    // Same keys, same file numbers, same block offsets; values differ in their first byte.
    let val = |store: usize, i: u64| {
        let mut v = value(i, 0);
        v[0] = [b'A', b'B'][store];
        v
    };
    let dbs: Vec<Db> = dirs
        .iter()
        .enumerate()
        .map(|(s, dir)| {
            let db = Db::open(dir.path(), Options::default().block_cache(cache.clone())).unwrap();
            for i in 0..N {
                db.put(key(i), val(s, i)).unwrap();
            }
            db.flush().unwrap();
            db.wait_for_background_work().unwrap();
            db
        })
        .collect();
    let tables: Vec<Vec<(u64, u64)>> = dbs
        .iter()
        .map(|db| {
            db.stats()
                .tables
                .iter()
                .map(|t| (t.number, t.file_size))
                .collect()
        })
        .collect();
    assert_eq!(
        tables[0], tables[1],
        "both stores have the same table files"
    );
    assert_eq!(cache.stats().inserts, 0);

    // Store A's blocks go into the cache first; store B must not be served them.
    let read_all = |s: usize| {
        for i in 0..N {
            assert_eq!(
                dbs[s].get(key(i)).unwrap(),
                Some(val(s, i)),
                "store {s} key {i}"
            );
        }
    };
    read_all(0);
    let after_a = cache.stats();
    assert!(after_a.inserts > 0);
    assert_eq!(after_a.inserts, after_a.misses);
    read_all(1);
    let after_b = cache.stats();
    assert_eq!(after_b.inserts, 2 * after_a.inserts, "{after_b:?}");
    assert_eq!(after_b.misses, 2 * after_a.misses);
    assert_eq!(after_b.evictions, 0);
    assert_eq!(after_b.blocks, after_b.inserts);

    // Again, from the cache alone, each store with its own values.
    read_all(0);
    read_all(1);
    read_all(0);
    let again = cache.stats();
    assert_eq!(again.misses, after_b.misses, "{again:?}");
    assert_eq!(again.inserts, after_b.inserts);
    assert_eq!(again.hits, after_b.hits + 3 * N);
    // Each store reports the shared cache's figures.
    assert_eq!(dbs[0].stats().block_cache, again);
    assert_eq!(dbs[1].stats().block_cache, again);

    // A closed store leaves the other one reading correctly.
    let mut dbs = dbs;
    dbs.remove(0).close().unwrap();
    for i in 0..N {
        assert_eq!(dbs[0].get(key(i)).unwrap(), Some(val(1, i)));
    }
}

/// Sixteen keys far apart (sixteen blocks) of a store of `n` keys.
fn hot_keys(n: u64) -> Vec<u64> {
    (0..16).map(|j| j * (n / 16) + 7).collect()
}

fn get_hot(db: &Db, hot: &[u64], rounds: u64) {
    for _ in 0..rounds {
        for &i in hot {
            assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 0)));
        }
    }
}

/// A store of `n` keys (about ten times `capacity` of blocks) whose 16 hot blocks are read
/// `ROUNDS` times, so the cache knows them as hot.
fn store_with_hot_blocks(dir: &Path, capacity: u64, n: u64) -> Db {
    // Tables of 2 MiB, so that the store has several and a full compaction rewrites them.
    let options = Options::default()
        .block_cache_size(capacity)
        .table_size(2 << 20)
        .level1_size(8 << 20);
    let db = Db::open(dir, options).unwrap();
    fill(&db, 0..n, 0);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let s = db.stats();
    assert!(
        s.table_bytes() > 8 * capacity,
        "data ({} bytes) is about 10x the cache",
        s.table_bytes()
    );
    let hot = hot_keys(n);
    get_hot(&db, &hot, ROUNDS);
    let warm = db.stats().block_cache;
    assert_eq!(
        warm.hits + warm.misses,
        ROUNDS * hot.len() as u64,
        "{warm:?}"
    );
    assert_eq!(
        warm.misses,
        hot.len() as u64,
        "only the first round misses: {warm:?}"
    );
    db
}

/// Scans the whole store, then reads the hot keys once: the misses of that round.
fn hot_misses_after_a_scan(db: &Db, n: u64) -> u64 {
    let before = db.stats().block_cache;
    let all = scan(db);
    assert_eq!(all.len() as u64, n);
    for (i, (k, v)) in all.iter().enumerate() {
        assert_eq!((k, v), (&key(i as u64), &value(i as u64, 0)));
    }
    let scanned = db.stats().block_cache;
    assert!(scanned.bytes <= scanned.capacity);
    assert!(
        scanned.misses - before.misses > n / 40,
        "the scan read its blocks through the cache: {scanned:?}"
    );
    assert!(scanned.evictions > before.evictions);
    get_hot(db, &hot_keys(n), 1);
    db.stats().block_cache.misses - scanned.misses
}

const ROUNDS: u64 = 20;

#[test]
fn a_full_scan_does_not_push_out_hot_blocks_and_compaction_bypasses_the_cache() {
    const CAPACITY: u64 = 1 << 20;
    const N: u64 = 85_000;
    let dir = tempfile::tempdir().unwrap();
    let db = store_with_hot_blocks(dir.path(), CAPACITY, N);
    let hot = hot_keys(N);
    let misses = hot_misses_after_a_scan(&db, N);
    println!("after a scan of 10x the cache: {misses} of 16 hot blocks missed");
    assert!(
        misses * 10 < 16,
        "{misses} of 16 hot blocks pushed out by a scan"
    );
    let before = db.stats().block_cache;
    get_hot(&db, &hot, ROUNDS);
    assert!(db.stats().block_cache.misses - before.misses <= misses);

    // Compaction reads every table and writes new ones without touching the cache.
    let tables_before = live_tables(&db);
    let compactions_before = db.stats().compactions;
    let before = db.stats().block_cache;
    db.compact().unwrap();
    db.wait_for_background_work().unwrap();
    let s = db.stats();
    assert!(s.compactions > compactions_before, "a compaction ran");
    assert!(live_tables(&db).is_disjoint(&tables_before));
    let c = s.block_cache;
    assert_eq!(
        (c.inserts, c.hits, c.misses, c.blocks),
        (before.inserts, before.hits, before.misses, before.blocks),
        "compaction touched the block cache: {before:?} -> {c:?}"
    );
    // The new tables' blocks come in with the next reads, one miss and insert each.
    get_hot(&db, &hot, 1);
    let c2 = db.stats().block_cache;
    assert_eq!(c2.misses - c.misses, hot.len() as u64);
    assert_eq!(c2.inserts - c.inserts, hot.len() as u64);
    // The cache is full (of blocks of the compacted-away tables, left to age out), so a block
    // read once only waits in the cache's small probation part, and may be pushed out of it by
    // the next miss in its shard before its second read; a block missed twice is admitted for
    // good. After that the hot set reads from the cache alone, and survives a scan.
    get_hot(&db, &hot, 2);
    let settled = db.stats().block_cache;
    get_hot(&db, &hot, ROUNDS);
    assert_eq!(db.stats().block_cache.misses, settled.misses);
    let misses = hot_misses_after_a_scan(&db, N);
    assert!(
        misses * 10 < 16,
        "{misses} of 16 hot blocks pushed out by a second scan"
    );
}

/// The same with a 256 KiB cache: 2 shards of 128 KiB. With quick_cache's default 3% for
/// blocks seen once (3.9 KiB a shard, less than one block) a scan's blocks overflowed into the
/// part kept for hot blocks and pushed 1 to 9 of the 16 out; the cache now keeps 10%.
#[test]
fn a_full_scan_does_not_push_out_hot_blocks_of_a_small_cache() {
    const CAPACITY: u64 = 256 << 10;
    const N: u64 = 21_000;
    // Four stores (four caches, each with its own hashing of blocks to shards).
    let mut total = 0;
    for _ in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let db = store_with_hot_blocks(dir.path(), CAPACITY, N);
        let misses = hot_misses_after_a_scan(&db, N);
        println!("256 KiB cache: {misses} of 16 hot blocks missed after a scan");
        total += misses;
    }
    assert!(
        total * 10 < 4 * 16,
        "{total} of 64 hot blocks pushed out by scans"
    );
}

#[test]
fn a_block_cache_of_size_zero_is_off() {
    const N: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default().block_cache_size(0)).unwrap();
    fill(&db, 0..N, 0);
    db.flush().unwrap();
    fill(&db, 0..N / 2, 1);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    for round in 0..2 {
        for i in 0..N {
            let v = if i < N / 2 { 1 } else { 0 };
            assert_eq!(db.get(key(i)).unwrap(), Some(value(i, v)), "round {round}");
        }
    }
    assert_eq!(scan(&db).len() as u64, N);
    let s = db.stats();
    assert_eq!(s.block_cache, BlockCacheStats::default());
    assert!(s.data_block_reads >= 2 * N);
    db.compact().unwrap();
    assert_eq!(db.get(key(1)).unwrap(), Some(value(1, 1)));
    assert_eq!(db.stats().block_cache, BlockCacheStats::default());
}

// ---------------------------------------------------------------------------------------
// Table cache.

/// A store of many small tables that may keep only 16 files open, and little block cache,
/// so that reads keep opening and closing files.
fn many_tables_options() -> Options {
    let mut options = Options::default()
        .max_open_files(16)
        .table_size(4 << 10)
        .memtable_size(8 << 10)
        .block_cache_size(32 << 10);
    options.block_size = 1024;
    options
}

/// Descriptors this process holds open on table files of `dir` (deleted ones included), as
/// the kernel lists them.
fn open_table_descriptors(dir: &Path) -> usize {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| {
            let name = target.to_string_lossy();
            target.starts_with(&dir) && (name.ends_with(".sst") || name.ends_with(".sst (deleted)"))
        })
        .count()
}

/// The table cache's count, and the kernel's count of descriptors. While background work runs,
/// the flush or compaction may hold a few more for an instant (a file it is reading, a table it
/// just wrote); at rest the limit holds exactly.
fn assert_open_files_bounded(db: &Db, dir: &Path, at_rest: bool, what: &str) -> usize {
    let t = db.stats().table_cache;
    assert_eq!(t.capacity, 16);
    assert!(t.open_files <= 16, "{what}: {t:?}");
    let fds = open_table_descriptors(dir);
    let limit = if at_rest { 16 } else { 16 + 4 };
    assert!(fds <= limit, "{what}: {fds} table files open ({t:?})");
    fds
}

#[test]
fn many_more_tables_than_open_files_match_a_model() {
    const KEYS: u64 = 10_000;
    const STEPS: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), many_tables_options()).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for i in 0..8_000 {
        db.put(key(i), value(i, 0)).unwrap();
        model.insert(key(i), value(i, 0));
        if i % 500 == 0 {
            let _ = assert_open_files_bounded(&db, dir.path(), false, "loading");
        }
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let tables = db.stats().tables.len();
    assert!(tables > 160, "{tables} tables");
    let _ = assert_open_files_bounded(&db, dir.path(), true, "loaded");

    let mut rng = SmallRng::seed_from_u64(0x7ab1e);
    let mut most_fds = 0;
    for step in 0..STEPS {
        let i = rng.gen_range(0..KEYS);
        let what = match rng.gen_range(0..100) {
            0..=44 => {
                let v = value(i, step + 1);
                db.put(key(i), &v).unwrap();
                model.insert(key(i), v);
                "put"
            }
            45..=54 => {
                db.delete(key(i)).unwrap();
                model.remove(&key(i));
                "delete"
            }
            55..=86 => {
                assert_eq!(
                    db.get(key(i)).unwrap().as_ref(),
                    model.get(&key(i)),
                    "step {step}: get {i}"
                );
                "get"
            }
            87..=98 => {
                let start = key(i);
                let got: Vec<(Vec<u8>, Vec<u8>)> = db
                    .range::<&[u8], _>((Bound::Included(&start[..]), Bound::Unbounded))
                    .take(40)
                    .collect::<Result<_>>()
                    .unwrap();
                let want: Vec<(Vec<u8>, Vec<u8>)> = model
                    .range(start..)
                    .take(40)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert!(got == want, "step {step}: range from {i}");
                "range"
            }
            _ => {
                db.flush().unwrap();
                "flush"
            }
        };
        if step == STEPS / 2 {
            db.compact().unwrap();
        }
        let fds =
            assert_open_files_bounded(&db, dir.path(), false, &format!("step {step} ({what})"));
        most_fds = most_fds.max(fds);
    }
    // The descriptor count is live: reads kept many files open, never more than the limit.
    assert!(most_fds >= 8, "at most {most_fds} table files open");
    db.wait_for_background_work().unwrap();
    let s = db.stats();
    println!("{} tables, table cache {:?}", s.tables.len(), s.table_cache);
    assert!(s.tables.len() > 160, "{} tables", s.tables.len());
    assert!(s.table_cache.opens > 16, "{:?}", s.table_cache);
    assert!(s.table_cache.closes > 0, "{:?}", s.table_cache);
    for i in 0..KEYS {
        assert_eq!(
            db.get(key(i)).unwrap().as_ref(),
            model.get(&key(i)),
            "key {i}"
        );
    }
    assert!(scan(&db) == model_pairs(&model));
    let _ = assert_open_files_bounded(&db, dir.path(), true, "end");
    // No reader holds a compacted-away table any more: its file is gone.
    assert_eq!(table_files(dir.path()), live_tables(&db));
    db.close().unwrap();

    let db = Db::open(dir.path(), many_tables_options()).unwrap();
    // The reopened store may go on with work of its own (a table made from the WAL's tail,
    // a compaction it calls for): the bound is exact once that is done.
    let _ = assert_open_files_bounded(&db, dir.path(), false, "reopened");
    db.wait_for_background_work().unwrap();
    let _ = assert_open_files_bounded(&db, dir.path(), true, "reopened, at rest");
    assert!(scan(&db) == model_pairs(&model));
    for i in (0..KEYS).step_by(7) {
        assert_eq!(
            db.get(key(i)).unwrap().as_ref(),
            model.get(&key(i)),
            "key {i}"
        );
    }
    let t = db.stats().table_cache;
    assert!(t.opens > 16 && t.closes > 0, "{t:?}");
    // The lookups may have called for a refit of the filters, which reads tables too.
    db.wait_for_background_work().unwrap();
    let _ = assert_open_files_bounded(&db, dir.path(), true, "reopened, after reads");
}

#[test]
fn an_iterator_reads_compacted_away_tables_whose_files_were_closed() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), many_tables_options().block_cache_size(0)).unwrap();
    fill(&db, 0..6_000, 0);
    // Overwrites in level 0, so that the compaction has work to do.
    fill(&db, 0..300, 1);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let mut expected: Vec<(Vec<u8>, Vec<u8>)> = (0..6_000)
        .map(|i| (key(i), value(i, u64::from(i < 300))))
        .collect();
    let old_tables = live_tables(&db);
    assert!(old_tables.len() > 100);

    let mut it = db.iter();
    let head: Vec<(Vec<u8>, Vec<u8>)> = it.by_ref().take(10).collect::<Result<_>>().unwrap();
    assert!(head[..] == expected[..10]);
    // Writes after the iterator was made are not seen by it.
    db.put(key(3), "later").unwrap();
    db.compact().unwrap();
    db.wait_for_background_work().unwrap();
    let new_tables = live_tables(&db);
    assert!(new_tables.is_disjoint(&old_tables));
    // The iterator still holds the old tables: their files stay, though the table cache,
    // 16 files for over 100 new tables, has closed them.
    let on_disk = table_files(dir.path());
    assert!(
        old_tables.is_subset(&on_disk),
        "old table files deleted under a reader"
    );
    assert!(db.stats().table_cache.closes > 0);
    assert!(open_table_descriptors(dir.path()) <= 16);

    let rest: Vec<(Vec<u8>, Vec<u8>)> = it.by_ref().collect::<Result<_>>().unwrap();
    assert!(
        rest[..] == expected[10..],
        "the iterator read the old tables"
    );
    drop(it);
    assert_eq!(
        table_files(dir.path()),
        new_tables,
        "old files deleted by the last reader"
    );
    expected[3].1 = b"later".to_vec();
    assert!(scan(&db) == expected);
}

// ---------------------------------------------------------------------------------------
// A table file truncated under a running store.

fn names_file(e: &Error, path: &Path) -> bool {
    match e {
        Error::Corruption { file, .. } => file == path,
        Error::Io { context, .. } => context.contains(&path.display().to_string()),
        _ => false,
    }
}

/// Three level-0 tables of 3,000 keys each; the middle one is cut to half its length while
/// the store is open. Reads of its lost half fail with an error naming it; everything else
/// reads as before.
fn truncated_table_under_a_running_store(options: Options, label: &str) {
    const PER_TABLE: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    for t in 0..3 {
        fill(&db, t * PER_TABLE..(t + 1) * PER_TABLE, 0);
        db.flush().unwrap();
    }
    db.wait_for_background_work().unwrap();
    let s = db.stats();
    assert_eq!(s.tables.len(), 3, "{label}: {:?}", s.levels);
    let victim = s
        .tables
        .iter()
        .find(|t| t.smallest_key == key(PER_TABLE))
        .expect("the table of the middle keys");
    assert_eq!(victim.largest_key, key(2 * PER_TABLE - 1));
    let path: PathBuf = dir.path().join(format!("{:06}.sst", victim.number));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), victim.file_size);

    // Warm the cache with the other tables and the first tenth of the victim.
    let warm = |i: u64| !(PER_TABLE + PER_TABLE / 10..2 * PER_TABLE).contains(&i);
    for i in (0..3 * PER_TABLE).filter(|&i| warm(i)) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 0)));
    }

    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(victim.file_size / 2).unwrap();
    drop(file);

    let mut errors = 0;
    for i in 0..3 * PER_TABLE {
        let in_victim = (PER_TABLE..2 * PER_TABLE).contains(&i);
        // Past 60% of the victim's keys, their blocks lie past the cut.
        let lost = in_victim && i - PER_TABLE >= PER_TABLE * 6 / 10;
        match db.get(key(i)) {
            Ok(v) => {
                assert!(!lost, "{label}: key {i} read from a cut-off block");
                assert_eq!(v, Some(value(i, 0)), "{label}: key {i}");
            }
            Err(e) => {
                assert!(in_victim, "{label}: key {i} outside the cut table: {e}");
                assert!(names_file(&e, &path), "{label}: key {i}: {e}");
                if !warm(i) {
                    errors += 1;
                }
            }
        }
    }
    println!("{label}: {errors} of {PER_TABLE} keys of the cut table unreadable");
    assert!(errors >= PER_TABLE * 4 / 10, "{label}: {errors} errors");

    // A scan gives correct pairs up to an error naming the file.
    let mut n = 0u64;
    let mut failed = false;
    for item in db.iter() {
        match item {
            Ok((k, v)) => {
                assert_eq!((k, v), (key(n), value(n, 0)), "{label}: scan");
                n += 1;
            }
            Err(e) => {
                assert!(names_file(&e, &path), "{label}: scan: {e}");
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "{label}: the scan read past the cut");
    assert!(
        (PER_TABLE..2 * PER_TABLE).contains(&n),
        "{label}: scan stopped at {n}"
    );

    // The store goes on: writes and reads of other keys work.
    db.put(key(99_999), "after").unwrap();
    assert_eq!(db.get(key(99_999)).unwrap(), Some(b"after".to_vec()));
    assert_eq!(db.get(key(0)).unwrap(), Some(value(0, 0)));
    drop(db);
}

#[test]
fn truncated_table_under_a_running_store_with_default_options() {
    truncated_table_under_a_running_store(Options::default(), "default");
}

#[test]
fn truncated_table_under_a_running_store_without_block_cache() {
    truncated_table_under_a_running_store(Options::default().block_cache_size(0), "no block cache");
}

#[test]
fn truncated_table_under_a_running_store_with_pread() {
    truncated_table_under_a_running_store(Options::default().mmap_reads(false), "pread");
}

/// An iterator that outlives its store, in a directory a new store has since taken over (file
/// numbers start again at 1, so the names match): dropping it must not delete the new store's
/// files, and reading on must give an error or the old data, never the new store's.
#[test]
fn an_iterator_that_outlives_its_store_touches_no_file_of_a_later_store() {
    let dir = tempfile::tempdir().unwrap();
    let options = || many_tables_options().block_cache_size(0);
    let db = Db::open(dir.path(), options()).unwrap();
    fill(&db, 0..3_000, 0);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let mut it = db.iter();
    let first = it.next().unwrap().unwrap();
    assert_eq!(first, (key(0), value(0, 0)));
    db.compact().unwrap();
    drop(db);

    // A new store in the same directory, written with other values.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let db = Db::open(dir.path(), options()).unwrap();
    fill(&db, 0..3_000, 7);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let files_before = table_files(dir.path());

    for (i, item) in it.by_ref().enumerate() {
        match item {
            Ok((k, v)) => {
                let i = i as u64 + 1;
                assert_eq!(k, key(i));
                assert_eq!(v, value(i, 0), "the old iterator read the new store's data");
            }
            Err(_) => break,
        }
    }
    drop(it);
    assert_eq!(
        table_files(dir.path()),
        files_before,
        "the old iterator deleted files of the new store"
    );
    for i in (0..3_000).step_by(97) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 7)));
    }
}
