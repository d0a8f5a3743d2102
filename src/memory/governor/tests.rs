use proptest::prelude::*;

use super::*;

const MIB: u64 = 1 << 20;
const CACHE: usize = 1;
const INDEX: usize = 2;
const FILTERS: usize = 3;

/// 96 MiB of memtables, a 32 MiB block cache and a 64 MiB filter limit, with an index cache
/// of `index` bytes, following reads.
fn given(index: Option<u64>) -> Given {
    Given {
        memtables: 96 * MIB,
        block_cache: Some(32 * MIB),
        index_cache: index,
        filters: Some(64 * MIB),
        follows_reads: true,
    }
}

fn governor(index: Option<u64>) -> Governor {
    Governor::new(given(index))
}

/// `g` with the block cache's and the filters' targets at `cache` and `filters` (the index
/// cache's as given).
fn at(g: Governor, cache: u64, filters: u64) -> Governor {
    {
        let mut state = lock(&g.state);
        state.targets[CACHE] = cache;
        state.targets[FILTERS] = filters;
    }
    g
}

/// A store of `keys` keys whose whole filters would take 256 MiB, after `lookups` lookups of
/// which the cache served `hits` and `false_positives` met one, its cache having served
/// `hit_rate` of its reads since the open.
fn reading(keys: u64, lookups: u64, hits: u64, false_positives: u64, hit_rate: f64) -> Reading {
    Reading {
        counted: Counted {
            lookups,
            cache_hits: hits,
            false_positives,
        },
        cache_hit_rate: hit_rate,
        keys,
        index_partitions: None,
        whole_filters: 256 * MIB,
    }
}

fn targets(g: &Governor) -> [u64; 4] {
    lock(&g.state).targets
}

#[test]
fn uniform_absent_lookups_over_a_big_store_move_memory_to_the_filters() {
    // 100M keys, 11% of lookups a false positive, the cache serving 0.3% of them.
    let seen = reading(100_000_000, 10_000, 30, 1_100, 0.003);
    let g = governor(None);
    let after = g.rebalance(&seen, |_| ()).expect("a move");
    assert_eq!((after[CACHE], after[FILTERS]), (28 * MIB, 68 * MIB));
    assert_eq!(g.filter_limit(), Some(68 * MIB));
    // Never below an eighth of the cache, and not by less than half a step (2 MiB): 6 MiB
    // gives its last 2 MiB, 5 MiB nothing.
    let g = at(governor(None), 6 * MIB, 90 * MIB);
    assert_eq!(g.rebalance(&seen, |_| ()).map(|t| t[CACHE]), Some(4 * MIB));
    let g = at(governor(None), 5 * MIB, 91 * MIB);
    assert_eq!(g.rebalance(&seen, |_| ()), None);
}

#[test]
fn a_cache_that_serves_the_lookups_keeps_its_memory_and_gets_it_back() {
    // A skewed load: the cache serves 60% of lookups; false positives are rare.
    let seen = reading(100_000_000, 10_000, 6_000, 100, 0.6);
    // Nothing below the given limit for the cache to take back.
    assert_eq!(governor(None).rebalance(&seen, |_| ()), None);
    // A step is an eighth of the smaller first target of the two: 4 MiB of the cache's 32.
    let g = at(governor(None), 20 * MIB, 76 * MIB);
    let after = g.rebalance(&seen, |_| ()).expect("a move back");
    assert_eq!((after[CACHE], after[FILTERS]), (24 * MIB, 72 * MIB));
    // Filters given far more than the cache (a quarter of 2 GiB beside 32 MiB) step by the
    // cache's eighth too, and the cache takes back the last of what it gave, however little.
    let g = Governor::new(Given {
        filters: Some(512 * MIB),
        ..given(None)
    });
    let g = at(g, 31 * MIB, 513 * MIB);
    let after = g.rebalance(&seen, |_| ()).expect("the last MiB back");
    assert_eq!((after[CACHE], after[FILTERS]), (32 * MIB, 512 * MIB));
}

#[test]
fn a_cache_that_served_a_twentieth_of_its_reads_gives_nothing_up() {
    // The filters would save more per byte in this window (absent keys read few blocks, so
    // the cache looks idle), but since the open it has served 6% of its reads.
    let seen = reading(1_000_000, 10_000, 10, 5_000, 0.06);
    assert_eq!(governor(None).rebalance(&seen, |_| ()), None);
}

#[test]
fn close_calls_and_empty_windows_move_nothing() {
    let g = at(governor(None), 20 * MIB, 76 * MIB);
    assert_eq!(g.rebalance(&reading(1_000_000, 0, 0, 0, 0.0), |_| ()), None);
    // The filters save 1.5 times what the cache does per byte: within the factor of two.
    let keys = 10_000_000u64;
    let fp = 1_000u64;
    let filters_save = false_positives_saved_per_byte(fp as f64 / 10_000.0, keys as f64);
    let hits = (filters_save / 1.5 * 20.0 * MIB as f64 * 10_000.0) as u64;
    assert_eq!(
        g.rebalance(&reading(keys, 10_000, hits, fp, 0.0), |_| ()),
        None
    );
}

/// A load's rates: the share of lookups the cache serves at its first size, and the share
/// that meet a false positive at the filters' first limit.
#[derive(Clone, Copy)]
struct Load {
    hits: f64,
    false_positives: f64,
}

/// The moves between the cache and the filters of a store of 30M keys, a 32 MiB cache and a
/// 20 MiB filter limit, read every 8,192 lookups, `looks` times in each of `phases` in turn,
/// its cache having served 1% of its reads since the open. The counts follow the targets as
/// the rule models them: the cache's hits in proportion to its size, the false positives by
/// `false_positive_factor` of what the filters gained.
fn moves(phases: &[Load], looks: usize) -> Vec<i64> {
    let (given_cache, given_filters, keys) = (32 * MIB, 20 * MIB, 30_000_000u64);
    let g = Governor::new(Given {
        memtables: 96 * MIB,
        block_cache: Some(given_cache),
        index_cache: None,
        filters: Some(given_filters),
        follows_reads: true,
    });
    let mut counted = Counted::default();
    let mut now = targets(&g);
    let mut moves = Vec::new();
    for load in phases {
        for _ in 0..looks {
            let hits = load.hits * now[CACHE] as f64 / given_cache as f64;
            let grown = (now[FILTERS] - given_filters) as f64;
            let fp = load.false_positives * false_positive_factor(grown, keys as f64);
            counted.lookups += 8_192;
            counted.cache_hits += (hits * 8_192.0).round() as u64;
            counted.false_positives += (fp * 8_192.0).round() as u64;
            let Some(after) = g.rebalance(
                &Reading {
                    counted,
                    cache_hit_rate: 0.01,
                    keys,
                    index_partitions: None,
                    whole_filters: u64::MAX,
                },
                |_| (),
            ) else {
                continue;
            };
            moves.push(after[FILTERS] as i64 - now[FILTERS] as i64);
            now = after;
        }
    }
    moves
}

#[test]
fn phases_of_present_and_absent_keys_move_memory_one_way_not_back_and_forth() {
    // Phases of 200,000 lookups. Present keys: the cache serves 3% of them, and 0.5% meet a
    // false positive; absent keys: the cache serves 0.01%, and 5% meet a false positive.
    // Over each phase alone, the cache would save more per byte in one and the filters in the
    // other; over the recent lookups the mix decides, and memory moves one way only.
    let present = Load {
        hits: 0.03,
        false_positives: 0.005,
    };
    let absent = Load {
        hits: 0.0001,
        false_positives: 0.05,
    };
    let moved = moves(&[present, absent].repeat(4), 24);
    assert!(!moved.is_empty());
    assert!(moved.iter().all(|&m| m > 0), "memory moved back: {moved:?}");
}

#[test]
fn a_move_rescales_the_window_so_memory_does_not_overshoot() {
    // 1% of lookups served by the cache, 2% meeting a false positive: five steps of 2.5 MiB
    // (an eighth of the filters' 20 MiB) take the false positives to 0.4%, where the
    // filters no longer save twice what the cache does per byte, and nothing moves after,
    // however long the load goes on. (Counted at the old targets, the window would go on
    // asking for more.)
    let steady = [Load {
        hits: 0.01,
        false_positives: 0.02,
    }];
    assert_eq!(moves(&steady, 400), vec![(2 * MIB + MIB / 2) as i64; 5]);
}

#[test]
fn a_lasting_change_of_load_moves_memory_back_within_a_few_million_lookups() {
    let g = at(governor(None), 20 * MIB, 76 * MIB);
    let mut counted = Counted::default();
    let mut look = |cache_hits: u64, false_positives: u64| {
        counted.lookups += 8_192;
        counted.cache_hits += cache_hits;
        counted.false_positives += false_positives;
        g.rebalance(
            &Reading {
                counted,
                cache_hit_rate: 0.6,
                keys: 100_000_000,
                index_partitions: None,
                whole_filters: 256 * MIB,
            },
            |_| (),
        )
    };
    // A million absent-key lookups the filters serve, then a skew the cache serves.
    for _ in 0..128 {
        assert_eq!(look(1, 900), None);
    }
    let mut lookups = 0;
    let after = loop {
        if let Some(after) = look(5_000, 8) {
            break after;
        }
        lookups += 8_192;
        assert!(lookups < 4_000_000, "no move after {lookups} lookups");
    };
    assert!(lookups > 0, "moved on one window");
    assert_eq!(after[CACHE], 24 * MIB);
}

#[test]
fn the_index_cache_lends_what_its_partitions_leave_and_takes_it_back_as_they_grow() {
    let g = governor(Some(32 * MIB));
    // A load the cache serves (so it gives nothing), with false positives the filters cut.
    let mut seen = reading(100_000_000, 10_000, 6_000, 1_100, 0.6);
    // Nothing is lent before a partition has been read to size them by.
    assert_eq!(g.rebalance(&seen, |_| ()), None);
    // 8 MiB of partitions keep 9 MiB: the other 23 MiB save nothing where they are, and go
    // at once.
    seen.index_partitions = Some(8 * MIB);
    seen.counted.lookups += 10_000;
    assert_eq!(g.rebalance(&seen, |_| ()).map(|t| t[INDEX]), Some(9 * MIB));
    assert_eq!(g.filter_limit(), Some(64 * MIB + 23 * MIB));
    // No more than whole filters would hold.
    let small = governor(Some(32 * MIB));
    seen.whole_filters = 66 * MIB;
    assert_eq!(
        small.rebalance(&seen, |_| ()).map(|t| t[FILTERS]),
        Some(66 * MIB)
    );
    seen.whole_filters = 256 * MIB;
    // The partitions grow, but not into half the room kept for them: nothing moves; past it,
    // the index cache takes back from the filters what they need, at once.
    seen.index_partitions = Some(8 * MIB + 4 * MIB / 10);
    seen.counted.lookups += 10_000;
    assert_eq!(g.rebalance(&seen, |_| ()), None);
    seen.index_partitions = Some(9 * MIB);
    seen.counted.lookups += 10_000;
    let after = g.rebalance(&seen, |_| ()).expect("taken back");
    let needs = 9 * MIB + 9 * MIB / 8;
    assert_eq!(after[INDEX], needs);
    assert_eq!(after[FILTERS], 64 * MIB + 32 * MIB - needs);
}

#[test]
fn nothing_moves_without_a_limit_a_cache_of_its_own_or_the_policy() {
    let seen = reading(100_000_000, 10_000, 30, 1_100, 0.003);
    let given = Given {
        memtables: 96 * MIB,
        block_cache: Some(32 * MIB),
        index_cache: Some(32 * MIB),
        filters: Some(64 * MIB),
        follows_reads: true,
    };
    for given in [
        Given {
            filters: None,
            ..given
        },
        Given {
            block_cache: None,
            index_cache: None,
            ..given
        },
        Given {
            follows_reads: false,
            ..given
        },
    ] {
        let g = Governor::new(given);
        assert!(!g.moves());
        assert_eq!(g.rebalance(&seen, |_| ()), None);
    }
    assert_eq!(
        Governor::new(Given {
            filters: None,
            ..given
        })
        .filter_limit(),
        None
    );
}

/// One reading of a random store: the lookups since the last reading and what they met.
fn arbitrary_reading() -> impl Strategy<Value = (u64, u64, u64, f64, u64, Option<u64>, u64)> {
    (
        0u64..50_000,
        0u64..50_000,
        0u64..50_000,
        0.0f64..0.2,
        1u64..200_000_000,
        proptest::option::of(0u64..64 * MIB),
        0u64..512 * MIB,
    )
}

proptest! {
    /// The governor's invariants (`docs/design.md`, "Memory"), under any sequence of
    /// readings: the targets add up to the total the options gave; each is at or above its
    /// floor; the caches never above what they were given; the filters never take more than
    /// whole filters would hold; and the filters' limit is their target.
    #[test]
    fn the_targets_keep_their_total_and_floors(
        cache in proptest::option::of(MIB..256 * MIB),
        index in proptest::option::of(MIB..256 * MIB),
        filters in MIB..256 * MIB,
        readings in proptest::collection::vec(arbitrary_reading(), 1..60),
    ) {
        let g = Governor::new(Given {
            memtables: 96 * MIB,
            block_cache: cache,
            index_cache: index,
            filters: Some(filters),
            follows_reads: true,
        });
        let total: u64 = g.given.iter().sum();
        let mut counted = Counted::default();
        for (lookups, hits, fp, hit_rate, keys, partitions, whole) in readings {
            counted.lookups += lookups;
            counted.cache_hits += hits.min(lookups);
            counted.false_positives += fp.min(lookups);
            let before = targets(&g);
            let reading = Reading {
                counted,
                cache_hit_rate: hit_rate,
                keys,
                index_partitions: partitions,
                whole_filters: whole,
            };
            let mut applied = None;
            let moved = g.rebalance(&reading, |t| applied = Some(*t));
            let now = targets(&g);
            prop_assert_eq!(moved.is_some(), now != before);
            prop_assert_eq!(applied, moved);
            prop_assert_eq!(now.iter().sum::<u64>(), total);
            for role in MemoryRole::ALL {
                let (at, floor) = (role.at(), g.floors[role.at()]);
                prop_assert!(now[at] >= floor, "{:?} {} below {}", role, now[at], floor);
            }
            prop_assert_eq!(now[0], 96 * MIB);
            prop_assert!(now[CACHE] <= g.given[CACHE] && now[INDEX] <= g.given[INDEX]);
            if now[FILTERS] > before[FILTERS] {
                prop_assert!(now[FILTERS] <= whole.max(before[FILTERS]));
            }
            prop_assert_eq!(g.filter_limit(), Some(now[FILTERS]));
            let rows = g.roles(|_| 0);
            prop_assert_eq!(rows.iter().map(|r| r.target).sum::<u64>(), total);
        }
    }
}
