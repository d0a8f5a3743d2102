//! A table's filter as a reader holds it: its units (the whole filter, or each partition of a
//! partitioned one, `partitions.rs`), each kept whole, folded or dropped as the store's
//! filter memory plan says (`crate::filter_plan`); the probes lookups make; the lookups each
//! unit counts; and reading units from the file, all at once or one at a time.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::filter::{FilterParams, KeyHash};
use crate::fs::RandomAccessFile;
use crate::metrics::ReadCountersSnapshot;
use crate::sstable::filter::block as filter_block;
use crate::sstable::filter::partitions::{FilterLayout, FilterUnit};
use crate::sstable::filter::prefix::PrefixAnswer;
use crate::sstable::filter::unit::{FilterKind, Prefetched, UnitFilter};
use crate::sstable::format::{BlockHandle, BlockKind};
use crate::sstable::properties::TableProperties;
use crate::sstable::table::{read_block, Table};

/// How much of a table's filter is kept in memory for lookups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterResidency {
    /// The table was written without a filter.
    NoFilter,
    /// The whole filter, as written.
    Whole,
    /// Folded to `1 / factor` of its bits ([`BloomFilter::fold`](crate::filter::BloomFilter::fold)): every key it holds still
    /// passes, at the rate of a filter with `1 / factor` the bits per key.
    Folded(u32),
    /// None kept: every lookup within the table's key range reads a data block.
    Dropped,
}

impl FilterResidency {
    /// The factor the filter held is folded by from the one written (1 for the whole one);
    /// `None` when no filter is held.
    pub fn fold_factor(self) -> Option<u32> {
        match self {
            FilterResidency::Whole => Some(1),
            FilterResidency::Folded(f) => Some(f),
            FilterResidency::NoFilter | FilterResidency::Dropped => None,
        }
    }
}

/// What a table's filter says of one key before its bits are tested: which unit answers,
/// with the first bits its probe tests already fetched towards the CPU cache
/// ([`Table::prefetch_filter`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum FilterProbe {
    /// The table has no filter: it may hold the key.
    Admit,
    /// Unit `unit` answers for the key, but its filter was dropped: the table may hold it.
    Unheld { unit: u32 },
    /// The key lies past the last partition: the table cannot hold it.
    Reject,
    /// Unit `unit`'s filter answers; `bits` are the first its probe tests.
    Probe { unit: u32, bits: Prefetched },
}

impl FilterProbe {
    /// Whether a filter was asked (and its answer counts as a probe).
    pub(crate) fn asks_filter(&self) -> bool {
        matches!(self, FilterProbe::Reject | FilterProbe::Probe { .. })
    }

    /// The unit of the filter that answers for the key, if any.
    pub(crate) fn unit(&self) -> Option<usize> {
        match *self {
            FilterProbe::Unheld { unit } | FilterProbe::Probe { unit, .. } => Some(unit as usize),
            FilterProbe::Admit | FilterProbe::Reject => None,
        }
    }
}

/// One unit of a table's filter as a reader holds it.
#[derive(Clone)]
pub(in crate::sstable) struct HeldUnit {
    pub(in crate::sstable) filter: Option<Arc<UnitFilter>>,
    pub(super) residency: FilterResidency,
}

impl HeldUnit {
    /// A unit read whole.
    pub(in crate::sstable) fn whole(filter: UnitFilter) -> HeldUnit {
        HeldUnit {
            filter: Some(Arc::new(filter)),
            residency: FilterResidency::Whole,
        }
    }

    /// A unit not read yet.
    pub(in crate::sstable) fn deferred() -> HeldUnit {
        HeldUnit {
            filter: None,
            residency: FilterResidency::Whole,
        }
    }
}

/// Which unit of a table's filter answers for a key.
pub(super) enum UnitFor {
    /// The table has no filter.
    NoFilter,
    /// Past the last partition: the table cannot hold the key.
    PastEnd,
    Unit(usize),
}

impl Table {
    /// Asks the filter whether the table may hold `key` (of `hash`), counting the probe (a
    /// table without a filter over whole keys asks its prefix filter, uncounted, and without
    /// either may hold anything) and, where the store counts them, the lookup for the unit of
    /// the filter that answers.
    ///
    /// A whole filter, the common case, takes the path it took before filters had units, and
    /// small enough to be inlined into the lookup: no search, one count in the table itself,
    /// one pointer to the bits. Out of line, through the units, an absent get of a one-table
    /// store ran 818 instructions against 790 before units (Valgrind's count).
    #[inline]
    pub fn filter_admits(
        &self,
        key: &[u8],
        hash: &KeyHash,
        tally: &mut ReadCountersSnapshot,
    ) -> bool {
        if self.partitioned {
            return self.partition_admits(key, hash, tally);
        }
        if !self.filtered {
            return self.prefix_filter_admits(key);
        }
        if self.inner.env.count_lookups {
            self.inner
                .first_unit_lookups
                .fetch_add(1, Ordering::Relaxed);
        }
        match &self.whole {
            Some(filter) => tally.count_probe(filter.contains_hash(hash)),
            None => true,
        }
    }

    /// For a table without a filter over whole keys (written with `whole_key_filtering` off):
    /// whether its prefix filter, when the store trusts it, lets `key`'s prefix through. A key
    /// without a prefix, or a table without such a filter, is let through. Counted nowhere:
    /// the filter counters describe the filters over whole keys (a prefix filter's answer
    /// shows in the data blocks gets read), and batched gets and `may_contain` ask only
    /// those.
    #[inline(never)]
    fn prefix_filter_admits(&self, key: &[u8]) -> bool {
        let (Some(filter), Some(extractor)) =
            (&self.inner.prefix_filter, &self.inner.env.prefix_extractor)
        else {
            return true;
        };
        extractor
            .prefix(key)
            .is_none_or(|prefix| filter.answer(&KeyHash::of(prefix)) != PrefixAnswer::Absent)
    }

    /// [`filter_admits`](Self::filter_admits) for a partitioned filter: the partition that
    /// answers for `key` is found first.
    fn partition_admits(
        &self,
        key: &[u8],
        hash: &KeyHash,
        tally: &mut ReadCountersSnapshot,
    ) -> bool {
        match self.unit_for(key) {
            UnitFor::NoFilter => true,
            UnitFor::PastEnd => tally.count_probe(false),
            UnitFor::Unit(u) => {
                self.count_lookup_in(u);
                match self.unit_filter(u) {
                    Some(filter) => tally.count_probe(filter.contains_hash(hash)),
                    None => true,
                }
            }
        }
    }

    /// Which unit of the filter answers for `key`. A whole filter's answer comes from the
    /// reader alone; only a partitioned one's search touches the shared table.
    pub(super) fn unit_for(&self, key: &[u8]) -> UnitFor {
        match (self.filtered, self.partitioned, &self.inner.filter_layout) {
            (false, _, _) => UnitFor::NoFilter,
            (true, false, _) => UnitFor::Unit(0),
            (true, true, None) => UnitFor::NoFilter,
            (true, true, Some(layout)) => {
                layout.unit_for(key).map_or(UnitFor::PastEnd, UnitFor::Unit)
            }
        }
    }

    /// The filter held for unit `unit`: for a whole filter, the one beside the reader.
    pub(super) fn unit_filter(&self, unit: usize) -> Option<&Arc<UnitFilter>> {
        match self.partitioned {
            false => self.whole.as_ref(),
            true => self.units[unit].filter.as_ref(),
        }
    }

    /// Whether a lookup of `key` has a filter to probe (the table was written with one, and
    /// the unit that answers for the key was not dropped to keep the store's filters within
    /// their memory limit).
    pub fn has_filter_for(&self, key: &[u8]) -> bool {
        match self.unit_for(key) {
            UnitFor::NoFilter => false,
            UnitFor::PastEnd => true,
            UnitFor::Unit(u) => self.unit_filter(u).is_some(),
        }
    }

    /// How much of the table's filter lookups probe: for a partitioned filter, `Whole` or
    /// `Dropped` when every partition is, else `Folded` by the ratio of the filter's bytes
    /// as written to those held (rounded up to a power of two);
    /// [`filter_units_residency`](Self::filter_units_residency) says it unit by unit.
    pub fn filter_residency(&self) -> FilterResidency {
        match &*self.units {
            [] => FilterResidency::NoFilter,
            [one] => one.residency,
            units if units.iter().all(|u| u.residency == FilterResidency::Whole) => {
                FilterResidency::Whole
            }
            units
                if units
                    .iter()
                    .all(|u| u.residency == FilterResidency::Dropped) =>
            {
                FilterResidency::Dropped
            }
            _ => {
                let written = self.whole_filter_words().unwrap_or(0) * 8;
                let held = self.held_filter_bytes().max(1) as u64;
                FilterResidency::Folded(written.div_ceil(held).next_power_of_two() as u32)
            }
        }
    }

    /// How each unit of the table's filter is held (empty without a filter).
    pub fn filter_units_residency(&self) -> Vec<FilterResidency> {
        self.units.iter().map(|u| u.residency).collect()
    }

    /// How many units the table's filter has: 1 for a whole filter, its partitions' count
    /// for a partitioned one, 0 without a filter.
    pub fn filter_units(&self) -> usize {
        self.units.len()
    }

    /// The words and keys of unit `unit` of the filter as written, known without reading it.
    pub(crate) fn filter_unit_shape(&self, unit: usize) -> Option<(u64, u64)> {
        let u = self.inner.filter_layout.as_ref()?.units().get(unit)?;
        Some((u.words, u.keys))
    }

    /// Unit `unit`'s predicted rate when it is a Ribbon filter, known without reading it.
    pub(crate) fn filter_unit_ribbon_rate(&self, unit: usize) -> Option<f64> {
        self.inner
            .filter_layout
            .as_ref()?
            .units()
            .get(unit)?
            .ribbon_rate()
    }

    /// Whether the table was opened without reading its filter, which
    /// [`load_filters`](Self::load_filters) reads.
    pub(crate) fn filter_is_deferred(&self) -> bool {
        self.deferred
    }

    /// The 64-bit words of the table's whole filter (as written; its memory is 8 bytes a
    /// word), known without reading the filter.
    pub(crate) fn whole_filter_words(&self) -> Option<u64> {
        Some(self.inner.filter_layout.as_ref()?.words())
    }

    /// The unit of the filter that would answer for `key`: `None` without a filter over
    /// whole keys, or for a key past the last partition's.
    pub(crate) fn filter_unit_of(&self, key: &[u8]) -> Option<usize> {
        match self.unit_for(key) {
            UnitFor::Unit(unit) => Some(unit),
            UnitFor::NoFilter | UnitFor::PastEnd => None,
        }
    }

    /// The last user key unit `unit` of a partitioned filter answers for; `None` for a whole
    /// filter (it answers for the table's whole range) or a unit past the last.
    pub(crate) fn filter_unit_last_key(&self, unit: usize) -> Option<&[u8]> {
        let layout = self.inner.filter_layout.as_ref()?;
        (layout.is_partitioned() && unit < layout.len()).then(|| layout.last_key(unit))
    }

    /// The filter's answer alone for `key` (of `hash`), counted nowhere: `true` without a
    /// filter.
    pub fn may_contain(&self, key: &[u8], hash: &KeyHash) -> bool {
        match self.unit_for(key) {
            UnitFor::NoFilter => true,
            UnitFor::PastEnd => false,
            UnitFor::Unit(u) => (self.unit_filter(u)).is_none_or(|f| f.contains_hash(hash)),
        }
    }

    /// Finds the unit of the filter that answers for `key` and brings its words for `hash`
    /// towards the CPU cache, ahead of a probe.
    pub(crate) fn prefetch_filter(&self, key: &[u8], hash: &KeyHash) -> FilterProbe {
        match self.unit_for(key) {
            UnitFor::NoFilter => FilterProbe::Admit,
            UnitFor::PastEnd => FilterProbe::Reject,
            UnitFor::Unit(u) => match self.unit_filter(u) {
                Some(filter) => FilterProbe::Probe {
                    unit: u as u32,
                    bits: filter.prefetch(hash),
                },
                None => FilterProbe::Unheld { unit: u as u32 },
            },
        }
    }

    /// The filter's answer for the key of `hash`, whose probe `probe` is what
    /// [`prefetch_filter`](Self::prefetch_filter) returned: most absent keys are ruled out
    /// by the first bits alone, tested without a branch. Counted nowhere.
    pub(crate) fn may_contain_prefetched(&self, hash: &KeyHash, probe: &FilterProbe) -> bool {
        match probe {
            FilterProbe::Admit | FilterProbe::Unheld { .. } => true,
            FilterProbe::Reject => false,
            FilterProbe::Probe { unit, bits } => {
                (self.unit_filter(*unit as usize)).is_none_or(|f| f.contains_prefetched(hash, bits))
            }
        }
    }

    /// The filter lookups probe (a Bloom filter folded where
    /// [`filter_residency`](Self::filter_residency) says so), when there is one and it is
    /// whole, not partitioned.
    pub fn filter(&self) -> Option<&UnitFilter> {
        match &*self.units {
            [one] if !self.is_partitioned() => one.filter.as_deref(),
            _ => None,
        }
    }

    /// Unit `unit` of the filter as held (a partition, or the whole filter for unit 0 of an
    /// unpartitioned one), when held.
    pub fn filter_unit(&self, unit: usize) -> Option<&UnitFilter> {
        self.units.get(unit)?.filter.as_deref()
    }

    /// Whether the table's filter is written as partitions.
    pub fn is_partitioned(&self) -> bool {
        (self.inner.filter_layout.as_ref()).is_some_and(|l| l.is_partitioned())
    }

    /// The filter's parameters as the table was written with them.
    pub fn filter_params(&self) -> Option<FilterParams> {
        self.inner.filter_params
    }

    /// The kind of the table's filter (of every partition of a partitioned one); `None`
    /// without a filter over whole keys.
    pub fn filter_kind(&self) -> Option<FilterKind> {
        (self.inner.filter_layout.as_ref()).map(|l| l.kind())
    }

    /// The rate the table's filter as written is predicted to have, by its layout's rule:
    /// the ClickHouse-based one for a standard filter, the blocked layout's own
    /// ([`blocked_rate`](crate::filter::blocked_rate)) for a cache-local one. `None` without a filter.
    pub fn predicted_filter_rate(&self) -> Option<f64> {
        // The properties' rate, which the table's open set by the layout its filter has.
        self.inner.properties.filter.map(|(_, _, rate)| rate)
    }

    /// The false-positive rate lookups of absent keys meet in this table: its filter's, as
    /// written or folded; 1 when it has none (every lookup in its range reads).
    /// For a partitioned filter, the mean over its partitions, each weighed by its keys.
    pub fn resident_false_positive_rate(&self) -> f64 {
        let Some(layout) = &self.inner.filter_layout else {
            return 1.0;
        };
        let rate = |held: &HeldUnit| match (held.residency, &held.filter) {
            (FilterResidency::Whole, _) => self.predicted_filter_rate().unwrap_or(1.0),
            (_, Some(f)) => f.expected_false_positive_rate(),
            (_, None) => 1.0,
        };
        let keys: u64 = layout.units().iter().map(|u| u.keys).sum();
        if keys == 0 || self.units.len() == 1 {
            return self.units.first().map_or(1.0, rate);
        }
        (layout.units().iter().zip(self.units.iter()))
            .map(|(u, held)| u.keys as f64 * rate(held))
            .sum::<f64>()
            / keys as f64
    }

    /// Bytes of the filter held in memory: its units, and what a partitioned filter keeps
    /// beside them ([`filter_top_bytes`](Self::filter_top_bytes)).
    pub fn filter_memory_bytes(&self) -> usize {
        self.held_filter_bytes() + self.filter_top_bytes()
    }

    /// Bytes the filter takes held whole, as written (its units and what a partitioned filter
    /// keeps beside them): the most memory it can use, whatever limit it is given.
    pub fn whole_filter_bytes(&self) -> u64 {
        let units: u64 = (0..self.filter_units())
            .filter_map(|unit| self.filter_unit_shape(unit))
            .map(|(words, _)| words * 8)
            .sum();
        units + self.filter_top_bytes() as u64
    }

    /// Bytes a partitioned filter keeps in memory beside its partitions' bits (0 for a whole
    /// filter), whatever becomes of the partitions: the top level, and per partition its
    /// reader's slot, lookup count and filter header.
    pub fn filter_top_bytes(&self) -> usize {
        let per_unit = std::mem::size_of::<HeldUnit>()
            + std::mem::size_of::<AtomicU64>()
            + std::mem::size_of::<UnitFilter>()
            + 16;
        (self.inner.filter_layout.as_ref())
            .filter(|l| l.is_partitioned())
            .map_or(0, |l| l.resident_bytes() + l.len() * per_unit)
    }

    fn held_filter_bytes(&self) -> usize {
        (self.units.iter())
            .filter_map(|u| u.filter.as_ref())
            .map(|f| f.memory_bytes())
            .sum()
    }
}

/// Reads, checks and decodes the filter block at `handle`: its layout, and its units' filters
/// (one for a whole filter, one per partition).
pub(in crate::sstable) fn read_filter_block(
    file: &dyn RandomAccessFile,
    path: &Path,
    handle: BlockHandle,
) -> Result<(FilterLayout, Vec<UnitFilter>)> {
    let contents = read_block(file, path, handle, BlockKind::Filter)?;
    // The filters are held in memory from here on (or folded, or dropped by the plan): their
    // pages in the page cache would only crowd out data blocks.
    file.wont_need(handle.offset, handle.size_with_trailer());
    if FilterLayout::top_len(&contents).is_none() {
        let filter = filter_block::decode(path, handle, &contents)?;
        let layout = FilterLayout::whole(handle, &contents)
            .map_err(|reason| filter_corrupt(path, handle.offset, reason))?;
        return Ok((layout, vec![filter]));
    }
    let layout = FilterLayout::decode_top(&contents, handle)
        .map_err(|m| m.in_block(path, BlockKind::Filter, handle.offset))?;
    let filters = (layout.units().iter())
        .map(|u| {
            let start = (u.offset - handle.offset) as usize;
            let bytes = &contents[start..start + u.serialized_len() as usize];
            partition_of_its_kind(UnitFilter::from_bytes(bytes), *u, path)
        })
        .collect::<Result<_>>()?;
    Ok((layout, filters))
}

/// The layout of the filter block at `handle`, without reading its filters: the header and
/// top level of a partitioned one (each checked by its own checksum), or nothing at all for a
/// whole one, whose size the handle gives.
pub(in crate::sstable) fn read_filter_layout(
    file: &dyn RandomAccessFile,
    path: &Path,
    handle: BlockHandle,
) -> Result<FilterLayout> {
    let bad = |reason: String| filter_corrupt(path, handle.offset, reason);
    // Enough for a partitioned filter's header and any whole filter's.
    let head_len = handle.size.min(40) as usize;
    let head = file.read_at(handle.offset, head_len)?;
    let Some(top_len) = FilterLayout::top_len(&head) else {
        // The whole filter's keys are the table's (`FilterLayout::set_whole_keys`); they are
        // checked once the filter is read. Its header names its kind.
        return FilterLayout::whole(handle, &head).map_err(bad);
    };
    if top_len as u64 > handle.size {
        return Err(bad(format!(
            "top level of {top_len} bytes in a block of {}",
            handle.size
        )));
    }
    let top = file.read_at(handle.offset, top_len)?;
    FilterLayout::decode_top(&top, handle)
        .map_err(|m| m.in_block(path, BlockKind::Filter, handle.offset))
}

/// One partition of a partitioned filter, read on its own and checked by its checksum.
pub(super) fn read_partition(
    file: &dyn RandomAccessFile,
    path: &Path,
    unit: FilterUnit,
) -> Result<UnitFilter> {
    let len = usize::try_from(unit.serialized_len())
        .map_err(|_| filter_corrupt(path, unit.offset, "partition too large".to_string()))?;
    let bytes = file.read_at(unit.offset, len)?;
    file.wont_need(unit.offset, unit.serialized_len());
    partition_of_its_kind(UnitFilter::from_bytes(&bytes), unit, path)
}

/// Partition `unit` decoded: a standard Bloom filter (never cache-local: the memory plan folds
/// partitions by words), or a Ribbon filter where the top level says its partitions are.
fn partition_of_its_kind(
    decoded: std::result::Result<UnitFilter, crate::filter::FilterError>,
    unit: FilterUnit,
    path: &Path,
) -> Result<UnitFilter> {
    let offset = unit.offset;
    let expected = match unit.ribbon {
        Some(_) => FilterKind::Ribbon,
        None => FilterKind::Bloom,
    };
    match decoded {
        Ok(filter) if filter.kind() != expected => Err(filter_corrupt(
            path,
            offset,
            format!(
                "a partition of kind {} where the top level says {}",
                filter.kind().name(),
                expected.name()
            ),
        )),
        Ok(UnitFilter::Ribbon(f)) if Some(f.shape()) != unit.ribbon => Err(filter_corrupt(
            path,
            offset,
            format!(
                "a Ribbon partition of columns {:?} where the top level says {:?}",
                f.shape(),
                unit.ribbon
            ),
        )),
        Ok(filter) => Ok(filter),
        Err(e) => Err(filter_corrupt(path, offset, e.to_string())),
    }
}

fn filter_corrupt(path: &Path, offset: u64, reason: String) -> Error {
    Error::corruption(
        path,
        Some(offset),
        format!("filter at offset {offset}: {reason}"),
    )
}

/// Whether a filter is the one the table's properties describe: key count and, for a Bloom
/// filter, parameters (a Ribbon filter's properties name the Bloom parameters its policy
/// gave, whose memory it spends at its own rate).
pub(in crate::sstable) fn filter_agrees(
    filter: &UnitFilter,
    params: Option<FilterParams>,
    keys: u64,
) -> bool {
    params.is_some_and(|p| {
        filter.len() == keys
            && (filter.bloom_params()).is_none_or(|b| b == (p.bits_per_key(), p.hashes()))
    })
}

/// Whether a partitioned filter's top level agrees with the table's properties: its
/// partitions hold the table's keys between them, and the last one ends at the table's
/// largest key (a lookup past it is answered "absent" without a probe). A whole filter's keys
/// are checked when it is read.
pub(in crate::sstable) fn layout_agrees(
    layout: &FilterLayout,
    params: Option<FilterParams>,
    props: &TableProperties,
) -> bool {
    params.is_some()
        && (!layout.is_partitioned()
            || (layout.total_keys() == props.distinct_keys
                && layout.last_key(layout.len() - 1) == props.largest_key.as_slice()))
}
