//! Entries that expire (`Options::ttl`): when each sequence number was written, sampled
//! (`seq_time`), and the number below which a keyspace's entries have expired.

use super::{lock, Inner, ReadState, Tree};
use crate::entry::SeqNo;
use crate::seq_time::now_secs;

impl Inner {
    /// The first sequence number of `tree`'s keyspace whose entries have not all expired
    /// (0: none has, or its entries live for ever). Every entry numbered below it was
    /// written a time to live ago or more: reads and compactions take it for deleted.
    pub(super) fn expired_below(&self, tree: &Tree) -> SeqNo {
        let Some(ttl) = tree.keyspace.options.ttl else {
            return 0;
        };
        let now = now_secs();
        let mut times = lock(&self.seq_times);
        // The writes made so far were made by now: a sample that lets them expire in time
        // when no write comes after them.
        times.note(
            self.visible_seq.load(std::sync::atomic::Ordering::Acquire),
            now,
        );
        times.expired_below(ttl.as_secs().max(1), now)
    }

    /// Whether a keyspace of `state` has a table whose every entry expired, for
    /// `drop_expired_tables` to drop.
    pub(super) fn has_expired_tables(&self, state: &ReadState) -> bool {
        (state.trees.iter())
            .filter(|t| t.options().ttl.is_some())
            .any(|t| {
                let below = self.expired_below(t);
                (t.version.tables()).any(|table| (1..below).contains(&table.meta.largest_seq))
            })
    }

    /// Notes that the writes up to `seq` were made by now (a write group's, as it becomes
    /// visible).
    pub(super) fn note_written(&self, seq: SeqNo) {
        lock(&self.seq_times).note(seq, now_secs());
    }

    /// The samples a flush records: those the manifest lacks, the flushed writes' included.
    pub(super) fn new_seq_times(&self) -> Vec<(SeqNo, u64)> {
        let mut times = lock(&self.seq_times);
        times.note(
            self.visible_seq.load(std::sync::atomic::Ordering::Acquire),
            now_secs(),
        );
        times.take_unpersisted()
    }

    /// Every sample: what a manifest written whole records.
    pub(super) fn all_seq_times(&self) -> Vec<(SeqNo, u64)> {
        lock(&self.seq_times).all().to_vec()
    }
}
