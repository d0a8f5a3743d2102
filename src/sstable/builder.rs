//! Writes a table file: data blocks as entries arrive, then the filter, properties and index
//! blocks and the footer. The file is written under a temporary name and renamed into place
//! only once it is complete and synced.

use std::cmp::Ordering;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::block_builder::BlockBuilder;
use super::compression::{self, Compression, CompressionProbe};
use super::filter::block as filter_block;
use super::filter::partitions as filter_partitions;
use super::filter::unit::FilterKind;
use super::format::{
    block_trailer, BlockHandle, BlockKind, Footer, FOOTER_LEN, PREFIX_FILTER_VERSION,
    SINGLE_INDEX_VERSION, TRAILER_LEN, TWO_LEVEL_INDEX_VERSION,
};
use super::index::builder::IndexBuilder;
use super::index::top::TopIndexBuilder;
use super::options::TableOptions;
use super::properties::{PrefixFilterProperties, TableProperties};
use super::separator::block_separator;
use crate::entry::{check_entry_len, entry_order, Entry, SeqNo, ValueKind};
use crate::error::{Error, Result};
use crate::filter::{BlockedParams, FilterParams, KeyHash};
use crate::fs::{SharedFs, WritableFile};
use crate::prefix::PrefixExtractor;

/// The name a table is written under until `finish` renames it: `path` + ".tmp".
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".tmp");
    PathBuf::from(name)
}

/// The index block must stay addressable by 32-bit restart offsets.
const MAX_INDEX_BLOCK: usize = u32::MAX as usize / 2;

/// An index partition's run of data blocks: how many, their bytes, and the last one's
/// separator (the partition's, in the top level).
#[derive(Default)]
struct PartitionRun {
    separator: Vec<u8>,
    seq: SeqNo,
    blocks: u64,
    data_bytes: u64,
}

impl PartitionRun {
    fn add(&mut self, separator: Vec<u8>, seq: SeqNo, handle: BlockHandle) {
        self.separator = separator;
        self.seq = seq;
        self.blocks += 1;
        self.data_bytes += handle.size_with_trailer();
    }
}

/// An index partition complete but not yet written: the index blocks follow the properties.
struct ClosedPartition {
    contents: Vec<u8>,
    run: PartitionRun,
}

/// The distinct prefixes of a table's keys, as they arrive: keys that share a prefix arrive
/// together (they sort together), so a prefix is hashed once, when it differs from the last.
struct PrefixCollector {
    extractor: PrefixExtractor,
    params: FilterParams,
    last: Option<Vec<u8>>,
    hashes: Vec<KeyHash>,
}

impl PrefixCollector {
    fn add(&mut self, key: &[u8]) {
        let Some(prefix) = self.extractor.prefix(key) else {
            return;
        };
        if self.last.as_deref() != Some(prefix) {
            self.hashes.push(KeyHash::of(prefix));
            let last = self.last.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(prefix);
        }
    }
}

/// Builds one table file from entries added in entry order.
pub struct TableBuilder {
    fs: SharedFs,
    path: PathBuf,
    tmp_path: PathBuf,
    file: Option<Box<dyn WritableFile>>,
    options: TableOptions,
    filter_params: Option<FilterParams>,
    data_block: BlockBuilder,
    /// The index of the data blocks since the last index partition closed (of all of them,
    /// while none has).
    index_block: IndexBuilder,
    /// The open index partition's blocks so far.
    partition: PartitionRun,
    /// Index partitions closed, to be written after the properties block.
    closed_partitions: Vec<ClosedPartition>,
    /// Their bytes together.
    closed_index_bytes: usize,
    /// The handle of the data block written last, whose index entry waits for the next
    /// block's first key: its separator only has to sort before that key.
    pending_index_entry: Option<BlockHandle>,
    /// Hash of each distinct user key, in order; the filter is built from them at `finish`.
    key_hashes: Vec<KeyHash>,
    /// The prefixes for a prefix filter, when the table has one.
    prefixes: Option<PrefixCollector>,
    /// The parameters of the whole filter written in the cache-local layout, once written.
    blocked_params: Option<BlockedParams>,
    /// Keys per filter partition, when the filter is to be partitioned.
    partition_keys: Option<u64>,
    /// The last user key of each full run of `partition_keys` keys so far.
    partition_last_keys: Vec<Vec<u8>>,
    last_key: Vec<u8>,
    last_seq: SeqNo,
    props: TableProperties,
    offset: u64,
    /// Whether data blocks are worth trying to compress, from how the last ones did.
    compression_probe: CompressionProbe,
    /// Set after a failed write: the file is incomplete and the builder refuses more work.
    failed: Option<String>,
    /// Set once the temporary file has been renamed or removed.
    done: bool,
}

impl TableBuilder {
    /// Starts a table that `finish` will put at `path`. `expected_keys` is a hint for how
    /// many distinct keys will be added; the filter is sized for the keys actually added.
    pub fn new(
        fs: SharedFs,
        path: &Path,
        options: TableOptions,
        expected_keys: u64,
    ) -> Result<TableBuilder> {
        let filter_params = options.validate()?;
        let tmp_path = temp_path(path);
        let file = fs.create(&tmp_path)?;
        let hint = usize::try_from(expected_keys.min(1 << 20)).unwrap_or(0);
        Ok(TableBuilder {
            fs,
            path: path.to_path_buf(),
            tmp_path,
            file: Some(file),
            filter_params,
            data_block: BlockBuilder::new(options.restart_interval),
            index_block: IndexBuilder::new(),
            partition: PartitionRun::default(),
            closed_partitions: Vec::new(),
            closed_index_bytes: 0,
            pending_index_entry: None,
            options,
            key_hashes: Vec::with_capacity(if filter_params.is_some() { hint } else { 0 }),
            prefixes: None,
            blocked_params: None,
            partition_keys: filter_params.and_then(|p| {
                filter_partitions::keys_per_partition(
                    options.filter_partition_size,
                    p.bits_per_key(),
                )
            }),
            partition_last_keys: Vec::new(),
            last_key: Vec::new(),
            last_seq: 0,
            props: TableProperties {
                format_version: SINGLE_INDEX_VERSION,
                entries: 0,
                tombstones: 0,
                distinct_keys: 0,
                smallest_key: Vec::new(),
                largest_key: Vec::new(),
                smallest_seq: 0,
                largest_seq: 0,
                raw_key_bytes: 0,
                raw_value_bytes: 0,
                filter: None,
                filter_size_bytes: 0,
                filter_partitions: 0,
                filter_kind: None,
                data_size: 0,
                data_blocks: 0,
                index_size: 0,
                properties_size: 0,
                file_size: 0,
                prefix_filter: None,
            },
            offset: 0,
            compression_probe: CompressionProbe::default(),
            failed: None,
            done: false,
        })
    }

    /// Gives the table a prefix filter over the prefixes `extractor` finds in its keys, in
    /// the standard layout with the filter policy's bits per key (divided by
    /// `TableOptions::filter_fold_target`: a prefix filter is never folded) and hashes
    /// (`docs/format.md`, "Prefix filter block"); without `whole_keys`, the table has no
    /// filter over its whole keys. A table whose policy is `Disabled` has neither. Call
    /// before the first entry.
    pub fn with_prefix_filter(mut self, extractor: &PrefixExtractor, whole_keys: bool) -> Self {
        let fold = self.options.filter_fold_target.max(1);
        let share = (self.filter_params)
            .map(|p| FilterParams::new((p.bits_per_key() / fold).max(1), p.hashes()).unwrap_or(p));
        if let Some(params) = share {
            self.prefixes = Some(PrefixCollector {
                extractor: extractor.clone(),
                params,
                last: None,
                hashes: Vec::new(),
            });
            if !whole_keys {
                self.filter_params = None;
                self.partition_keys = None;
                self.key_hashes = Vec::new();
            }
        }
        self
    }

    /// The final path of the table.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.props.entries
    }

    /// Adds an entry; entries must come in strictly increasing entry order (key ascending,
    /// then sequence number descending), else `Error::InvalidArgument`.
    pub fn add(&mut self, entry: &Entry) -> Result<()> {
        self.add_raw(&entry.key, entry.seq, entry.kind, &entry.value)
    }

    /// [`add`](Self::add) from parts.
    pub fn add_raw(&mut self, key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) -> Result<()> {
        self.check_usable()?;
        check_entry_len(key, value)?;
        if kind == ValueKind::Tombstone && !value.is_empty() {
            return Err(Error::InvalidArgument(
                "a tombstone cannot carry a value".to_string(),
            ));
        }
        let first = self.props.entries == 0;
        if !first && entry_order(key, seq, &self.last_key, self.last_seq) != Ordering::Greater {
            return Err(Error::InvalidArgument(format!(
                "entries out of order: key {:?} seq {seq} does not sort after key {:?} seq {}",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(&self.last_key),
                self.last_seq
            )));
        }
        if first || key != self.last_key.as_slice() {
            self.props.distinct_keys += 1;
            if let Some(prefixes) = &mut self.prefixes {
                prefixes.add(key);
            }
            if self.filter_params.is_some() {
                self.key_hashes.push(KeyHash::of(key));
                let n = self.key_hashes.len() as u64;
                if self.partition_keys.is_some_and(|p| n.is_multiple_of(p)) {
                    self.partition_last_keys.push(key.to_vec());
                }
            }
        }
        if first {
            self.props.smallest_key = key.to_vec();
            self.props.smallest_seq = seq;
            self.props.largest_seq = seq;
        }
        let p = &mut self.props;
        p.entries += 1;
        if kind == ValueKind::Tombstone {
            p.tombstones += 1;
        }
        p.smallest_seq = p.smallest_seq.min(seq);
        p.largest_seq = p.largest_seq.max(seq);
        p.raw_key_bytes += key.len() as u64;
        p.raw_value_bytes += value.len() as u64;

        self.add_pending_index_entry(Some(key))?;
        self.data_block.add(key, seq, kind, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.last_seq = seq;
        if self.data_block.estimated_size() >= self.options.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// What the file would weigh if finished now (data written, the open block, the index,
    /// the filter, properties and footer): lets compaction cut output at a target size.
    pub fn estimated_file_size(&self) -> u64 {
        let filter_bytes = |params: FilterParams, keys: usize| {
            let bits = (keys as u64 * u64::from(params.bits_per_key())).max(64);
            bits.div_ceil(64) * 8 + 36 + TRAILER_LEN as u64
        };
        let filter = self
            .filter_params
            .map_or(0, |p| filter_bytes(p, self.key_hashes.len()))
            + (self.prefixes.as_ref()).map_or(0, |c| filter_bytes(c.params, c.hashes.len()));
        let props = 128 + self.props.smallest_key.len() + self.last_key.len();
        self.offset
            + self.data_block.estimated_size() as u64
            + TRAILER_LEN as u64
            + self.index_block.estimated_size() as u64
            + self.closed_index_bytes as u64
            + 32
            + TRAILER_LEN as u64
            + filter
            + props as u64
            + FOOTER_LEN as u64
    }

    fn check_usable(&self) -> Result<()> {
        match &self.failed {
            Some(reason) => Err(Error::WritesRefused {
                reason: format!("building {}: {reason}", self.path.display()),
            }),
            None => Ok(()),
        }
    }

    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        let result = match self.file.as_mut() {
            Some(f) => f.append(bytes),
            None => Err(Error::InvalidArgument(
                "table file already closed".to_string(),
            )),
        };
        match result {
            Ok(()) => {
                self.offset += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.failed = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// Writes a block with its trailer, compressed when its kind may be and that pays.
    fn write_block(&mut self, contents: &[u8], kind: BlockKind) -> Result<BlockHandle> {
        let compressed = self.try_compress(contents, kind);
        let (stored, used) = match &compressed {
            Some((bytes, used)) => (bytes.as_slice(), *used),
            None => (contents, Compression::None),
        };
        let handle = BlockHandle {
            offset: self.offset,
            size: stored.len() as u64,
        };
        self.append(stored)?;
        self.append(&block_trailer(stored, kind, used))?;
        Ok(handle)
    }

    /// The block compressed, when its kind may be, the probe says it is worth a try (data
    /// blocks only: the others are few) and compressing pays.
    fn try_compress(&mut self, contents: &[u8], kind: BlockKind) -> Option<(Vec<u8>, Compression)> {
        if !kind.may_be_compressed() || self.options.compression == Compression::None {
            return None;
        }
        let is_data = kind == BlockKind::Data;
        if is_data && !self.compression_probe.should_try() {
            return None;
        }
        let compressed = compression::compress(contents, self.options.compression);
        if is_data {
            self.compression_probe.record(compressed.is_some());
        }
        compressed
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let contents = self.data_block.finish();
        let handle = self.write_block(&contents, BlockKind::Data)?;
        self.props.data_blocks += 1;
        self.props.data_size += handle.size_with_trailer();
        self.pending_index_entry = Some(handle);
        Ok(())
    }

    /// Adds the index entry of the data block written last, if it waits for one, now that the
    /// next block's first key (`None` after the last block) is known.
    fn add_pending_index_entry(&mut self, next_first_key: Option<&[u8]>) -> Result<()> {
        let Some(handle) = self.pending_index_entry.take() else {
            return Ok(());
        };
        let (separator, seq) = block_separator(&self.last_key, self.last_seq, next_first_key);
        self.index_block.add(&separator, seq, handle);
        self.partition.add(separator, seq, handle);
        let size = self.index_block.estimated_size();
        if size > MAX_INDEX_BLOCK {
            let reason = "index block grew past its 2 GiB limit".to_string();
            self.failed = Some(reason.clone());
            return Err(Error::InvalidArgument(reason));
        }
        let limit = self.options.index_partition_size;
        if limit > 0 && size >= limit {
            self.close_index_partition();
        }
        Ok(())
    }

    /// Ends the open index partition; the next data block starts another.
    fn close_index_partition(&mut self) {
        let contents = std::mem::take(&mut self.index_block).finish();
        let run = std::mem::take(&mut self.partition);
        self.closed_index_bytes += contents.len();
        self.closed_partitions
            .push(ClosedPartition { contents, run });
    }

    /// Whether `write_index` will write a two-level index: whether the index will be two
    /// partitions or more, the open one counted when another closed before it.
    fn index_is_two_level(&self) -> bool {
        let open = self.partition.blocks > 0 && !self.closed_partitions.is_empty();
        self.closed_partitions.len() + usize::from(open) >= 2
    }

    /// Writes the index after the properties block: one index block when it fits in one
    /// partition (format version 3), else its partitions and the top level over them (version
    /// 4). Returns the handle the footer names, the version, and the index's bytes.
    fn write_index(&mut self) -> Result<(BlockHandle, u32, u64)> {
        if self.partition.blocks > 0 && !self.closed_partitions.is_empty() {
            self.close_index_partition();
        }
        let start = self.offset;
        let mut partitions = std::mem::take(&mut self.closed_partitions);
        if partitions.len() < 2 {
            let index = match partitions.pop() {
                Some(only) => only.contents,
                None => std::mem::take(&mut self.index_block).finish(),
            };
            let handle = self.write_block(&index, BlockKind::Index)?;
            return Ok((handle, SINGLE_INDEX_VERSION, self.offset - start));
        }
        let mut top = TopIndexBuilder::default();
        for p in &partitions {
            let handle = self.write_block(&p.contents, BlockKind::Index)?;
            let run = &p.run;
            top.add(
                &run.separator,
                run.seq,
                handle.size,
                run.blocks,
                run.data_bytes,
            );
        }
        let handle = self.write_block(&top.finish(), BlockKind::TopIndex)?;
        Ok((handle, TWO_LEVEL_INDEX_VERSION, self.offset - start))
    }

    /// The filter block's contents: one filter over every key, or partitions of
    /// `partition_keys` keys each (a last run of fewer than half that joins the one before)
    /// when there are at least two.
    fn filter_contents(&mut self) -> Option<Vec<u8>> {
        let params = self.filter_params?;
        let keys = self.key_hashes.len();
        let per = self.partition_keys.unwrap_or(u64::MAX) as usize;
        let mut last_keys = std::mem::take(&mut self.partition_last_keys);
        let mut ends: Vec<usize> = (1..=last_keys.len()).map(|i| i * per).collect();
        let rest = keys - ends.last().copied().unwrap_or(0);
        if rest > 0 {
            if rest < per / 2 && !last_keys.is_empty() {
                last_keys.pop();
                ends.pop();
            }
            last_keys.push(self.last_key.clone());
            ends.push(keys);
        }
        if ends.len() > 1 {
            self.props.filter_partitions = ends.len() as u64;
        }
        let fold_target = self.options.filter_fold_target;
        let (contents, kind) = match ends.len() {
            0 | 1 => self.whole_filter(params, fold_target),
            _ => {
                let ribbon = self.options.ribbon_filter.then_some(fold_target);
                let (contents, is_ribbon) =
                    filter_partitions::encode(params, &self.key_hashes, &last_keys, &ends, ribbon);
                let kind = match is_ribbon {
                    true => FilterKind::Ribbon,
                    false => FilterKind::Bloom,
                };
                (contents, kind)
            }
        };
        self.props.filter_kind = Some(kind);
        Some(contents)
    }

    /// The table's filter as one unit, of the kind its options ask for: a Ribbon filter
    /// (unless the table is too small for one), a cache-local or a standard Bloom filter.
    fn whole_filter(&mut self, params: FilterParams, fold_target: u32) -> (Vec<u8>, FilterKind) {
        let ribbon = (self.options.ribbon_filter)
            .then(|| filter_block::build_ribbon(params, &self.key_hashes, fold_target))
            .flatten();
        if let Some(filter) = ribbon {
            return (filter.to_bytes(), FilterKind::Ribbon);
        }
        if self.options.cache_local_filter {
            let filter = filter_block::build_blocked(params, &self.key_hashes, fold_target);
            self.blocked_params = Some(filter.params());
            return (filter.to_bytes(), FilterKind::CacheLocalBloom);
        }
        let filter = filter_block::build(params, &self.key_hashes);
        (filter.to_bytes(), FilterKind::Bloom)
    }

    /// Completes the table: the last data block, the filter, properties and index blocks
    /// and the footer; syncs the file, renames it into place and syncs the directory.
    pub fn finish(mut self) -> Result<TableProperties> {
        self.check_usable()?;
        self.flush_data_block()?;
        self.add_pending_index_entry(None)?;

        let filter_handle = match self.filter_contents() {
            Some(contents) => Some(self.write_block(&contents, BlockKind::Filter)?),
            None => None,
        };
        if let Some(collector) = self.prefixes.take() {
            let filter = filter_block::build(collector.params, &collector.hashes);
            let handle = self.write_block(&filter.to_bytes(), BlockKind::PrefixFilter)?;
            self.props.prefix_filter = Some(PrefixFilterProperties {
                extractor: collector.extractor.name(),
                handle,
                prefixes: collector.hashes.len() as u64,
                two_level_index: self.index_is_two_level(),
            });
        }

        self.props.largest_key = self.last_key.clone();
        self.props.filter = match self.blocked_params {
            Some(p) => Some((
                p.bits_per_key(),
                p.hashes(),
                p.predicted_false_positive_rate(),
            )),
            None => self.filter_params.map(|p| {
                (
                    p.bits_per_key(),
                    p.hashes(),
                    p.predicted_false_positive_rate(),
                )
            }),
        };
        let properties = self.props.encode();
        let properties_handle = self.write_block(&properties, BlockKind::Properties)?;

        let (index_handle, index_version, index_size) = self.write_index()?;
        let version = match self.props.prefix_filter {
            Some(_) => PREFIX_FILTER_VERSION,
            None => index_version,
        };

        let footer = Footer {
            index: index_handle,
            filter: filter_handle,
            properties: properties_handle,
            version,
        };
        self.append(&footer.encode())?;

        let mut file = self
            .file
            .take()
            .ok_or_else(|| Error::InvalidArgument("table file already closed".to_string()))?;
        file.sync()?;
        drop(file);
        self.fs.rename(&self.tmp_path, &self.path)?;
        self.done = true;
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if let Err(e) = self.fs.sync_dir(&dir) {
            // The table is in no version yet, and the caller will write it again under another
            // number: a file left here would be one that nothing names.
            let _ = self.fs.remove(&self.path);
            return Err(e);
        }

        let mut props = self.props.clone();
        props.filter_size_bytes = filter_handle.map_or(0, |h| h.size_with_trailer());
        props.properties_size = properties_handle.size_with_trailer();
        props.index_size = index_size;
        props.format_version = version;
        props.file_size = self.offset;
        Ok(props)
    }

    /// Gives up on the table: closes and removes the temporary file.
    pub fn abandon(mut self) -> Result<()> {
        drop(self.file.take());
        self.done = true;
        self.fs.remove(&self.tmp_path)
    }
}

impl Drop for TableBuilder {
    /// A builder dropped without `finish` or `abandon` (or whose `finish` failed before the
    /// rename) removes its temporary file, as far as it can.
    fn drop(&mut self) {
        if !self.done {
            drop(self.file.take());
            let _ = self.fs.remove(&self.tmp_path);
        }
    }
}
