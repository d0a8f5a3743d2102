//! How much of each unit of a table's filter a reader holds: whole, folded by a factor, or
//! dropped. A reader with other filters is another `Table` over the same file, index and
//! caches: folded from the filters held where it can be, else read from the file again,
//! unit by unit, so a whole filter is never in memory at once.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::table_filter::{
    filter_agrees, read_filter_block, read_partition, FilterResidency, HeldUnit,
};
use crate::error::{Error, Result};
use crate::sstable::Table;

impl Table {
    /// This table with every unit of its filter kept as `residency` says (see
    /// [`with_filters`](Self::with_filters)).
    pub fn with_filter(&self, residency: FilterResidency) -> Result<Table> {
        self.with_filters(&vec![residency; self.units.len()])
    }

    /// This table with each unit of its filter kept as `residency` says, relative to the
    /// filter as written: whole, folded by a factor, or dropped. The result shares the file,
    /// index and caches; lookups through it probe the smaller filters, and readers of `self`
    /// keep theirs. Asking for more of a unit than is held (the bits are not kept), or for a
    /// factor its size does not allow, is `InvalidArgument`.
    pub fn with_filters(&self, residency: &[FilterResidency]) -> Result<Table> {
        if self.deferred {
            return self.read_filters(residency);
        }
        self.check_units(residency)?;
        let units = (self.units.iter().zip(residency))
            .map(|(held, &to)| self.kept(held, to))
            .collect::<Result<_>>()?;
        Ok(Table::with_units(Arc::clone(&self.inner), units, false))
    }

    fn check_units(&self, residency: &[FilterResidency]) -> Result<()> {
        match residency.len() == self.units.len() {
            true => Ok(()),
            false => Err(Error::InvalidArgument(format!(
                "{}: {} filter units asked for, the table has {}",
                self.path().display(),
                residency.len(),
                self.units.len()
            ))),
        }
    }

    /// `held` kept as `to`: the same, folded further, or dropped.
    fn kept(&self, held: &HeldUnit, to: FilterResidency) -> Result<HeldUnit> {
        // 0 when no filter is held, which nothing can be folded from.
        let now = held.residency.fold_factor().unwrap_or(0);
        let filter = match (to, &held.filter) {
            (FilterResidency::Dropped, Some(_)) => None,
            (FilterResidency::Folded(f), Some(filter)) if now > 0 && f.is_multiple_of(now) => {
                Some(Arc::new(filter.fold(f / now).map_err(|e| {
                    Error::InvalidArgument(format!("{}: {e}", self.path().display()))
                })?))
            }
            (same, _) if same == held.residency => held.filter.clone(),
            (asked, _) => {
                return Err(Error::InvalidArgument(format!(
                    "{}: a filter kept as {:?} cannot be kept as {asked:?}",
                    self.path().display(),
                    held.residency
                )))
            }
        };
        Ok(HeldUnit {
            filter,
            residency: to,
        })
    }

    /// A reader of this table (one opened with
    /// [`open_deferring_filter`](Self::open_deferring_filter)) with its filters read from
    /// the file, checked, and kept as `residency` says, unit by unit. A table whose filters
    /// are held already gives [`with_filters`](Self::with_filters)'s answer.
    pub(crate) fn load_filters(&self, residency: &[FilterResidency]) -> Result<Table> {
        match self.deferred {
            true => self.read_filters(residency),
            false => self.with_filters(residency),
        }
    }

    /// A reader of this table with each unit of its filter kept as `residency` says: folded
    /// from the filter held where it can be, else read from the file again (a unit folded
    /// or dropped earlier, grown back).
    pub(crate) fn refit_filters(&self, residency: &[FilterResidency]) -> Result<Table> {
        self.check_units(residency)?;
        let units = (self.units.iter().enumerate().zip(residency))
            .map(|((u, held), &to)| {
                let folds_from_held = match (to.fold_factor(), held.residency.fold_factor()) {
                    _ if self.deferred => false,
                    _ if to == held.residency || to == FilterResidency::Dropped => true,
                    (Some(to), Some(now)) => to.is_multiple_of(now),
                    _ => false,
                };
                match folds_from_held {
                    true => self.kept(held, to),
                    false => self.read_unit(u, to),
                }
            })
            .collect::<Result<_>>()?;
        Ok(Table::with_units(Arc::clone(&self.inner), units, false))
    }

    /// A reader of this table with its filters read from the file, unit by unit, checked,
    /// and each kept as `residency` says (so the whole filter is never in memory at once).
    fn read_filters(&self, residency: &[FilterResidency]) -> Result<Table> {
        self.check_units(residency)?;
        let units = (residency.iter().enumerate())
            .map(|(u, &to)| self.read_unit(u, to))
            .collect::<Result<_>>()?;
        // Each partition's read left the pages it shares with its neighbours: the whole
        // block's range leaves none.
        let inner = &self.inner;
        if let (Some(layout), Some(handle)) = (&inner.filter_layout, inner.filter_handle) {
            if layout.is_partitioned() {
                inner
                    .file()?
                    .wont_need(handle.offset, handle.size_with_trailer());
            }
        }
        Ok(Table::with_units(Arc::clone(&self.inner), units, false))
    }

    /// Unit `unit` of the filter read from the file, checked, and kept as `to` says.
    fn read_unit(&self, unit: usize, to: FilterResidency) -> Result<HeldUnit> {
        if matches!(to, FilterResidency::Dropped | FilterResidency::NoFilter) {
            return Ok(HeldUnit {
                filter: None,
                residency: to,
            });
        }
        let inner = &self.inner;
        let (Some(layout), Some(handle)) = (&inner.filter_layout, inner.filter_handle) else {
            return Err(Error::InvalidArgument(format!(
                "{}: the table has no filter",
                inner.path.display()
            )));
        };
        let file = inner.file()?;
        let u = layout.unit(unit);
        let (filter, bytes) = match layout.is_partitioned() {
            false => {
                let mut whole = read_filter_block(file.as_ref(), &inner.path, handle)?;
                (whole.1.remove(0), handle.size_with_trailer())
            }
            true => (
                read_partition(file.as_ref(), &inner.path, u)?,
                u.serialized_len(),
            ),
        };
        let counters = &inner.env.counters;
        counters.filter_reads.fetch_add(1, Ordering::Relaxed);
        counters
            .filter_bytes_read
            .fetch_add(bytes, Ordering::Relaxed);
        if !filter_agrees(&filter, inner.filter_params, u.keys) {
            return Err(Error::corruption(
                &inner.path,
                Some(u.offset),
                format!(
                    "filter at offset {}: its parameters or key count differ from the \
                     table's properties",
                    u.offset
                ),
            ));
        }
        let whole = HeldUnit {
            filter: Some(Arc::new(filter)),
            residency: FilterResidency::Whole,
        };
        self.kept(&whole, to)
    }
}
