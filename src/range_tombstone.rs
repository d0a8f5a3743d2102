//! Range deletions: a tombstone over the keys `start..end` at a sequence number, hiding every
//! version of those keys written before it.
//!
//! A range tombstone lives beside the entries, not among them: in its memtable until the
//! flush, then in the manifest, which records each keyspace's live range tombstones (the
//! repository's format notes, "Manifest"). Every read takes the newest tombstone covering
//! its key that its snapshot sees, and an entry older than that one is deleted. Reads ask
//! [`RangeTombstones`], the tombstones cut into fragments that do not overlap, each with the
//! sequence numbers of the tombstones over it, so that a lookup is one binary search.
//!
//! Compactions drop the entries a tombstone every reader sees hides, and once no table holds
//! an older entry of its range the tombstone goes too (`compaction`).

use std::collections::BTreeMap;

use crate::entry::SeqNo;
use crate::value::Newest;

/// The keys `start..end` (end excluded) deleted at `seq`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RangeTombstone {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
    pub seq: SeqNo,
}

impl RangeTombstone {
    /// Whether `key` lies in the range.
    pub fn covers(&self, key: &[u8]) -> bool {
        self.start.as_slice() <= key && key < self.end.as_slice()
    }

    /// Whether the range meets the keys `smallest..=largest`.
    pub fn meets(&self, smallest: &[u8], largest: &[u8]) -> bool {
        self.start.as_slice() <= largest && smallest < self.end.as_slice()
    }

    /// What is left of the tombstone outside the keys `smallest..=largest`: nothing, one
    /// piece or two, at its sequence number.
    pub fn without(&self, smallest: &[u8], largest: &[u8]) -> Vec<RangeTombstone> {
        if !self.meets(smallest, largest) {
            return vec![self.clone()];
        }
        let mut pieces = Vec::new();
        if self.start.as_slice() < smallest {
            pieces.push(RangeTombstone {
                start: self.start.clone(),
                end: smallest.to_vec(),
                seq: self.seq,
            });
        }
        // The first key after `largest` is `largest` followed by a zero byte.
        let mut past_largest = largest.to_vec();
        past_largest.push(0);
        if past_largest < self.end {
            pieces.push(RangeTombstone {
                start: past_largest,
                end: self.end.clone(),
                seq: self.seq,
            });
        }
        pieces
    }
}

/// Range tombstones cut at every start and end into fragments that do not overlap, sorted by
/// key; each fragment lists the sequence numbers of the tombstones over it, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeTombstones {
    /// The start of each fragment, ascending.
    starts: Vec<Vec<u8>>,
    /// The end of each fragment (excluded): at most the next fragment's start.
    ends: Vec<Vec<u8>>,
    /// The sequence numbers over each fragment, descending.
    seqs: Vec<Vec<SeqNo>>,
}

impl RangeTombstones {
    /// The fragments of `tombstones` (in any order, overlapping or not).
    pub fn new<'a>(tombstones: impl IntoIterator<Item = &'a RangeTombstone>) -> RangeTombstones {
        // At each boundary, the tombstones that start there come in and those that end there
        // go; the sequence numbers in force between two boundaries make a fragment.
        let mut changes: BTreeMap<&[u8], Vec<(SeqNo, bool)>> = BTreeMap::new();
        for t in tombstones {
            if t.start < t.end {
                changes
                    .entry(t.start.as_slice())
                    .or_default()
                    .push((t.seq, true));
                changes
                    .entry(t.end.as_slice())
                    .or_default()
                    .push((t.seq, false));
            }
        }
        let mut fragments = RangeTombstones::default();
        let mut in_force: BTreeMap<SeqNo, usize> = BTreeMap::new();
        let mut boundaries = changes.into_iter().peekable();
        while let Some((at, here)) = boundaries.next() {
            for (seq, starts) in here {
                match starts {
                    true => *in_force.entry(seq).or_default() += 1,
                    false => {
                        if let Some(n) = in_force.get_mut(&seq) {
                            *n -= 1;
                            if *n == 0 {
                                in_force.remove(&seq);
                            }
                        }
                    }
                }
            }
            let Some((next, _)) = boundaries.peek() else {
                break;
            };
            if in_force.is_empty() {
                continue;
            }
            let seqs: Vec<SeqNo> = in_force.keys().rev().copied().collect();
            // A fragment that carries on the one before it, with the same numbers, joins it.
            let joins = fragments
                .ends
                .last()
                .is_some_and(|end| end.as_slice() == at)
                && fragments.seqs.last() == Some(&seqs);
            match joins {
                true => *fragments.ends.last_mut().expect("a fragment") = next.to_vec(),
                false => {
                    fragments.starts.push(at.to_vec());
                    fragments.ends.push(next.to_vec());
                    fragments.seqs.push(seqs);
                }
            }
        }
        fragments
    }

    /// True when no key is covered.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The newest sequence number at most `snapshot` of a tombstone covering `key`.
    pub fn covering_seq(&self, key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        self.covering(key).iter().copied().find(|&s| s <= snapshot)
    }

    /// The sequence numbers of the tombstones covering `key`, newest first.
    pub fn covering(&self, key: &[u8]) -> &[SeqNo] {
        let at = self.starts.partition_point(|s| s.as_slice() <= key);
        match at.checked_sub(1) {
            Some(i) if key < self.ends[i].as_slice() => &self.seqs[i],
            _ => &[],
        }
    }
}

/// Which versions of a key a read takes for gone: those older than the range deletion
/// covering it (`deleted_at`, the newest its snapshot sees), and those expired (numbered below
/// `expired_below`, but not 0: a number zeroed at the bottom says nothing of when its entry
/// was written). Expiry is a deletion of every key that no snapshot escapes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Gone {
    pub deleted_at: Option<SeqNo>,
    pub expired_below: SeqNo,
}

impl Gone {
    /// What `ranges` and `expired_below` take of `key` for a reader at `snapshot`.
    pub fn of(
        ranges: Option<&RangeTombstones>,
        expired_below: SeqNo,
        key: &[u8],
        snapshot: SeqNo,
    ) -> Gone {
        Gone {
            deleted_at: ranges.and_then(|r| r.covering_seq(key, snapshot)),
            expired_below,
        }
    }

    /// Whether anything of the key is gone.
    pub fn any(&self) -> bool {
        self.deleted_at.is_some() || self.expired_below > 0
    }

    /// Whether the version numbered `seq` is gone (and so every older one: a table whose
    /// newest version is gone holds nothing else).
    pub fn takes(&self, seq: SeqNo) -> bool {
        self.deleted_at.is_some_and(|d| seq < d) || (seq > 0 && seq < self.expired_below)
    }

    /// `newest` as a read answers it: a version gone reads as deleted, at the deletion's
    /// number (its own, when it expired), and a key with no version under a deletion as
    /// deleted by it.
    pub fn apply(&self, newest: Option<Newest>) -> Option<Newest> {
        let deleted = |seq| Some(Newest { seq, value: None });
        match (newest, self.deleted_at) {
            (Some(n), Some(d)) if n.seq < d => deleted(d),
            (None, Some(d)) => deleted(d),
            (Some(n), _) if self.takes(n.seq) => deleted(n.seq),
            (newest, _) => newest,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn t(start: &str, end: &str, seq: SeqNo) -> RangeTombstone {
        RangeTombstone {
            start: start.into(),
            end: end.into(),
            seq,
        }
    }

    #[test]
    fn a_key_is_covered_by_the_newest_tombstone_its_snapshot_sees() {
        let all = [t("b", "f", 10), t("d", "h", 20), t("x", "y", 5)];
        let f = RangeTombstones::new(&all);
        assert_eq!(f.covering_seq(b"a", 100), None);
        assert_eq!(f.covering_seq(b"b", 100), Some(10));
        assert_eq!(f.covering_seq(b"e", 100), Some(20));
        assert_eq!(f.covering_seq(b"e", 15), Some(10));
        assert_eq!(f.covering_seq(b"e", 9), None);
        assert_eq!(f.covering_seq(b"h", 100), None);
        assert_eq!(f.covering_seq(b"xa", 100), Some(5));
        let takes = |key: &[u8], seq, snapshot| Gone::of(Some(&f), 0, key, snapshot).takes(seq);
        assert!(takes(b"c", 9, 100));
        assert!(!takes(b"c", 11, 100));
        assert!(!takes(b"c", 9, 9));
        // Empty and reversed ranges cover nothing.
        assert!(RangeTombstones::new(&[t("b", "b", 1), t("c", "a", 2)]).is_empty());
    }

    #[test]
    fn fragments_agree_with_the_tombstones_they_came_from() {
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..200 {
            let all: Vec<RangeTombstone> = (0..rng.gen_range(0..8))
                .map(|_| {
                    let a: u8 = rng.gen_range(b'a'..=b'y');
                    let b: u8 = rng.gen_range(b'a'..=b'z');
                    let seq = rng.gen_range(1..50);
                    RangeTombstone {
                        start: vec![a.min(b)],
                        end: vec![a.max(b)],
                        seq,
                    }
                })
                .collect();
            let f = RangeTombstones::new(&all);
            for key in b'a'..=b'z' {
                for snapshot in [0, 10, 25, 49, 100] {
                    let expected = (all.iter())
                        .filter(|t| t.covers(&[key]) && t.seq <= snapshot)
                        .map(|t| t.seq)
                        .max();
                    assert_eq!(f.covering_seq(&[key], snapshot), expected, "{all:?} {key}");
                }
            }
        }
    }

    #[test]
    fn a_tombstone_without_a_key_range_keeps_what_lies_outside() {
        let whole = t("b", "m", 3);
        assert_eq!(whole.without(b"a", b"z"), vec![]);
        assert_eq!(whole.without(b"n", b"z"), vec![whole.clone()]);
        assert_eq!(
            whole.without(b"d", b"f"),
            vec![t("b", "d", 3), t("f\0", "m", 3)]
        );
        assert_eq!(whole.without(b"a", b"c"), vec![t("c\0", "m", 3)]);
        assert_eq!(whole.without(b"c", b"z"), vec![t("b", "c", 3)]);
        // What is left covers exactly the keys outside.
        for key in [&b"b"[..], b"c", b"d", b"e", b"f", b"f\0", b"g", b"l"] {
            let left = whole.without(b"d", b"f");
            let expected = whole.covers(key) && !(b"d".as_slice()..=b"f".as_slice()).contains(&key);
            assert_eq!(left.iter().any(|p| p.covers(key)), expected, "{key:?}");
        }
    }

    #[test]
    fn a_read_answers_a_gone_version_as_deleted() {
        // Each answer as (sequence number, holds a value).
        let answer = |gone: Gone, newest: Option<(SeqNo, bool)>| {
            let newest = newest.map(|(seq, has)| Newest {
                seq,
                value: has.then(|| crate::value::Value::from(b"v".to_vec())),
            });
            gone.apply(newest).map(|n| (n.seq, n.value.is_some()))
        };
        let gone = Gone {
            deleted_at: Some(10),
            expired_below: 5,
        };
        assert_eq!(answer(gone, Some((12, true))), Some((12, true)));
        assert_eq!(
            answer(gone, Some((7, true))),
            Some((10, false)),
            "older than the deletion"
        );
        assert_eq!(
            answer(gone, None),
            Some((10, false)),
            "absent under a range deletion"
        );
        let expiry = Gone {
            deleted_at: None,
            expired_below: 5,
        };
        assert_eq!(
            answer(expiry, Some((4, true))),
            Some((4, false)),
            "expired: its own number"
        );
        assert_eq!(
            answer(expiry, Some((0, true))),
            Some((0, true)),
            "zeroed: of unknown age"
        );
        assert_eq!(answer(expiry, None), None);
        assert!(gone.any() && expiry.any() && !Gone::default().any());
    }
}
