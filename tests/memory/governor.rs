//! The memory governor's invariants on a store at work (`docs/design.md`, "Memory"): under
//! any mix of writes, flushes and lookups, the roles' targets add up to what the options
//! gave, none is below its floor, and what each role holds is within its target once the
//! background work a change brings has run.

use crate::common;

use bloomkv::{Db, MemoryRole, Options, RoleMemory, Stats};
use proptest::prelude::*;

fn row(stats: &Stats, role: MemoryRole) -> RoleMemory {
    *stats
        .memory
        .iter()
        .find(|r| r.role == role)
        .expect("a row per role")
}

/// The store's stats, read when no move came while they were read: a background turn may
/// move memory between the reading of one figure and the next.
fn stats_between_moves(db: &Db) -> Stats {
    loop {
        let (first, second) = (db.stats(), db.stats());
        let targets = |s: &Stats| s.memory.iter().map(|r| r.target).collect::<Vec<_>>();
        if targets(&first) == targets(&second) {
            return second;
        }
    }
}

/// Checks the invariants on `db`'s stats; `settled` when no background work is pending, so
/// what each role holds has been brought within its target.
fn check(db: &Db, settled: bool) -> Result<(), TestCaseError> {
    let stats = &stats_between_moves(db);
    prop_assert_eq!(stats.memory.len(), MemoryRole::ALL.len());
    let given: u64 = stats.memory.iter().map(|r| r.given).sum();
    let targets: u64 = stats.memory.iter().map(|r| r.target).sum();
    prop_assert_eq!(targets, given, "{:?}", stats.memory);
    for r in &stats.memory {
        prop_assert!(r.target >= r.floor, "{:?}", r);
    }
    let memtables = row(stats, MemoryRole::Memtables);
    prop_assert_eq!(memtables.target, memtables.given);
    let cache = row(stats, MemoryRole::BlockCache);
    prop_assert_eq!(cache.target, stats.block_cache.capacity);
    prop_assert!(cache.used <= cache.target, "{:?}", cache);
    let index = row(stats, MemoryRole::IndexPartitions);
    prop_assert_eq!(index.target, stats.index_cache.capacity);
    prop_assert!(index.used <= index.target, "{:?}", index);
    let filters = row(stats, MemoryRole::Filters);
    prop_assert_eq!(Some(filters.target), stats.filter_memory_limit);
    prop_assert_eq!(filters.used, stats.filter_memory_bytes);
    if settled {
        prop_assert!(filters.used <= filters.target, "{:?}", filters);
    }
    Ok(())
}

/// A small store whose filters are held to a third of what they would take whole, with a
/// block cache and an index cache small enough to give the filters memory.
fn options(cache: u64, index_cache: u64) -> Options {
    let mut options = (common::small_tree_options().filter_memory_limit(4_000))
        .memtable_size(12_800)
        .memory_follows_reads(true)
        .index_cache_size(index_cache)
        .compact_level0_at_rest(None);
    options.block_cache_size = cache;
    options.tuning.index_partition_size = 64;
    options
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    #[test]
    fn the_targets_keep_their_total_and_floors_and_the_roles_their_targets(
        cache in 4_096u64..64 << 10,
        index_cache in 4_096u64..64 << 10,
        rounds in proptest::collection::vec((0u64..3_000, 0u32..3, any::<bool>()), 4..10),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options(cache, index_cache)).unwrap();
        check(&db, true)?;
        let mut written = 0;
        for (writes, lookup_rounds, flush) in rounds {
            common::put_even(&db, written, written + writes);
            written += writes;
            if flush {
                db.flush().unwrap();
            }
            check(&db, false)?;
            // Absent and present gets, scattered: enough for the refit turns that move
            // memory (one every 8,192 lookups that reach the tables).
            for round in 0..u64::from(lookup_rounds) * 5_000 {
                let i = round * 7_919 % written.max(1);
                prop_assert_eq!(db.get(common::key(2 * i + 1)).unwrap(), None);
                if round % 4 == 0 && i < written {
                    prop_assert!(db.get(common::key(2 * i)).unwrap().is_some());
                }
            }
            check(&db, false)?;
            db.wait_for_background_work().unwrap();
            check(&db, true)?;
        }
        common::assert_even_keys_read_back(&db, written, |_| true);
    }
}
