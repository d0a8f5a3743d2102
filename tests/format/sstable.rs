//! Table files end to end: round trips, filter effectiveness measured through the read
//! counters, every single-byte corruption and every truncation, ordering rules.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bloomkv::entry::{entry_order, Entry, ValueKind};
use bloomkv::filter::KeyHash;
use bloomkv::fs::{FileLock, FileSystem, OsFileSystem, RandomAccessFile, SharedFs, WritableFile};
use bloomkv::metrics::ReadCounters;
use bloomkv::sstable::{temp_path, verify_table, FilterPolicy, Table, TableBuilder, TableOptions};
use bloomkv::{Error, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

// ---------------------------------------------------------------------------------------
// An in-memory file system, so the corruption tests can rewrite a file thousands of times.

#[derive(Default)]
struct MemFs {
    files: Mutex<HashMap<PathBuf, Arc<Vec<u8>>>>,
}

struct MemWritable {
    fs: Arc<MemFs>,
    path: PathBuf,
    buf: Vec<u8>,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.buf.extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.fs.put(&self.path, self.buf.clone());
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        self.flush()
    }
    fn len(&self) -> u64 {
        self.buf.len() as u64
    }
}

struct MemFile {
    path: PathBuf,
    bytes: Arc<Vec<u8>>,
}

impl RandomAccessFile for MemFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let start = usize::try_from(offset).ok();
        let range = start.and_then(|s| Some(s..s.checked_add(len)?));
        match range.and_then(|r| self.bytes.get(r)) {
            Some(b) => Ok(b.to_vec()),
            None => Err(Error::corruption(
                &self.path,
                Some(offset),
                "read past the end",
            )),
        }
    }
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }
}

struct MemLock;
impl FileLock for MemLock {}

fn not_found(path: &Path) -> Error {
    Error::io(
        format!("opening {}", path.display()),
        std::io::Error::from(std::io::ErrorKind::NotFound),
    )
}

impl MemFs {
    fn put(&self, path: &Path, bytes: Vec<u8>) {
        self.files
            .lock()
            .unwrap()
            .insert(path.to_path_buf(), Arc::new(bytes));
    }
    fn get(&self, path: &Path) -> Option<Arc<Vec<u8>>> {
        self.files.lock().unwrap().get(path).cloned()
    }
}

/// `FileSystem` wants `&self`, writers need the `Arc`: wrap it.
#[derive(Clone, Default)]
struct SharedMemFs(Arc<MemFs>);

impl FileSystem for SharedMemFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.0.put(path, Vec::new());
        Ok(Box::new(MemWritable {
            fs: self.0.clone(),
            path: path.to_path_buf(),
            buf: Vec::new(),
        }))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let buf = self.0.get(path).ok_or_else(|| not_found(path))?.to_vec();
        Ok(Box::new(MemWritable {
            fs: self.0.clone(),
            path: path.to_path_buf(),
            buf,
        }))
    }
    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let bytes = self.0.get(path).ok_or_else(|| not_found(path))?;
        Ok(Arc::new(MemFile {
            path: path.to_path_buf(),
            bytes,
        }))
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        Ok(self.0.get(path).ok_or_else(|| not_found(path))?.to_vec())
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut files = self.0.files.lock().unwrap();
        let bytes = files.remove(from).ok_or_else(|| not_found(from))?;
        files.insert(to.to_path_buf(), bytes);
        Ok(())
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.0
            .files
            .lock()
            .unwrap()
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }
    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let files = self.0.files.lock().unwrap();
        let mut names: Vec<String> = files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        names.sort();
        Ok(names)
    }
    fn create_dir_all(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.get(path).is_some()
    }
    fn lock(&self, _path: &Path) -> Result<Box<dyn FileLock>> {
        Ok(Box::new(MemLock))
    }

    fn lock_shared(&self, _path: &Path) -> Result<Option<Box<dyn FileLock>>> {
        Ok(Some(Box::new(MemLock)))
    }
}

// ---------------------------------------------------------------------------------------
// Helpers.

fn build(fs: SharedFs, path: &Path, options: TableOptions, entries: &[Entry]) -> Result<()> {
    let mut b = TableBuilder::new(fs, path, options, entries.len() as u64)?;
    for e in entries {
        b.add(e)?;
    }
    b.finish().map(|_| ())
}

fn random_bytes(rng: &mut SmallRng, max_len: usize) -> Vec<u8> {
    let len = rng.gen_range(0..=max_len);
    (0..len).map(|_| rng.gen()).collect()
}

/// About `n` entries over random binary keys, some with several versions, some tombstones,
/// mostly short values, some empty, and a few of 1 MiB.
fn random_entries(seed: u64, n: usize) -> Vec<Entry> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut keys: Vec<Vec<u8>> = (0..n * 8 / 10)
        .map(|_| random_bytes(&mut rng, 20))
        .collect();
    keys.sort();
    keys.dedup();
    let mut entries = Vec::with_capacity(n);
    for key in keys {
        let versions = if rng.gen_ratio(1, 5) {
            rng.gen_range(2..=4)
        } else {
            1
        };
        let mut seq = rng.gen_range(1_000u64..1_000_000);
        for _ in 0..versions {
            let e = if rng.gen_ratio(1, 10) {
                Entry::tombstone(key.clone(), seq)
            } else if rng.gen_ratio(1, 30_000) {
                Entry::value(key.clone(), seq, vec![rng.gen::<u8>(); 1 << 20])
            } else if rng.gen_ratio(1, 4) {
                Entry::value(key.clone(), seq, Vec::new())
            } else {
                Entry::value(key.clone(), seq, random_bytes(&mut rng, 40))
            };
            entries.push(e);
            seq -= rng.gen_range(1..500);
        }
    }
    // A value of 1 MiB is certain, whatever the draw.
    if let Some(e) = entries.iter_mut().find(|e| !e.is_tombstone()) {
        e.value = vec![0xab; 1 << 20];
    }
    entries
}

/// The newest entry per user key.
fn newest(entries: &[Entry]) -> Vec<&Entry> {
    let mut out: Vec<&Entry> = Vec::new();
    for e in entries {
        if out.last().is_none_or(|l| l.key != e.key) {
            out.push(e);
        }
    }
    out
}

fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

// ---------------------------------------------------------------------------------------

#[test]
fn round_trip_of_100k_random_entries() {
    let entries = random_entries(0x5eed, 100_000);
    assert!(entries.len() > 90_000);
    assert!(entries.iter().any(|e| e.value.len() == 1 << 20));
    let dir = tmpdir();
    let path = dir.path().join("000001.sst");
    let fs: SharedFs = Arc::new(OsFileSystem);

    let mut b = TableBuilder::new(
        fs.clone(),
        &path,
        TableOptions::default(),
        entries.len() as u64,
    )
    .unwrap();
    for e in &entries {
        b.add(e).unwrap();
    }
    let estimate = b.estimated_file_size();
    assert!(!path.exists(), "the table appears only when finished");
    let props = b.finish().unwrap();
    assert!(path.exists());
    assert!(!temp_path(&path).exists());
    let actual = std::fs::metadata(&path).unwrap().len();
    assert_eq!(props.file_size, actual);
    let error = (estimate as f64 - actual as f64).abs() / actual as f64;
    assert!(error < 0.02, "estimate {estimate} vs actual {actual}");

    println!(
        "round trip: {} entries, {} distinct keys, {} data blocks, file {} bytes \
         (estimate before finish {estimate}), filter {} bytes, index {} bytes",
        props.entries,
        props.distinct_keys,
        props.data_blocks,
        props.file_size,
        props.filter_size_bytes,
        props.index_size
    );
    let newest = newest(&entries);
    assert_eq!(props.entries, entries.len() as u64);
    assert_eq!(props.distinct_keys, newest.len() as u64);
    assert_eq!(
        props.tombstones,
        entries.iter().filter(|e| e.is_tombstone()).count() as u64
    );
    assert_eq!(props.smallest_key, entries[0].key);
    assert_eq!(props.largest_key, entries.last().unwrap().key);
    assert_eq!(
        props.smallest_seq,
        entries.iter().map(|e| e.seq).min().unwrap()
    );
    assert_eq!(
        props.largest_seq,
        entries.iter().map(|e| e.seq).max().unwrap()
    );

    let counters = Arc::new(ReadCounters::new());
    let table = Table::open(fs.clone(), &path, counters.clone()).unwrap();
    assert_eq!(table.properties(), &props);
    assert_eq!(
        table.filter().unwrap().len(),
        newest.len() as u64,
        "one filter key per distinct user key"
    );

    for e in &newest {
        let got = table.get(&e.key, &KeyHash::of(&e.key)).unwrap();
        assert_eq!(got.as_ref(), Some(*e));
    }
    let c = counters.snapshot();
    assert_eq!(c.filter_probes, newest.len() as u64);
    assert_eq!(c.filter_true_positives, newest.len() as u64);
    assert_eq!(c.data_block_reads, newest.len() as u64);

    // Older versions through a snapshot.
    for w in entries.windows(2).step_by(7) {
        if w[0].key == w[1].key {
            let got = table
                .get_at(&w[1].key, w[1].seq, &KeyHash::of(&w[1].key))
                .unwrap();
            assert_eq!(got.as_ref(), Some(&w[1]));
            let below = table
                .get_at(&w[1].key, w[0].seq - 1, &KeyHash::of(&w[1].key))
                .unwrap();
            assert_eq!(below.as_ref(), Some(&w[1]));
        }
    }

    let all: Vec<Entry> = table.iter().collect::<Result<_>>().unwrap();
    assert_eq!(all.len(), entries.len());
    assert!(all == entries);

    let mut rng = SmallRng::seed_from_u64(7);
    for _ in 0..2_000 {
        let probe = random_bytes(&mut rng, 20);
        let want = entries.iter().position(|e| e.key >= probe);
        let mut it = table.iter_from(&probe);
        match want {
            Some(i) => {
                assert_eq!(it.next().unwrap().unwrap(), entries[i]);
                if let Some(next) = entries.get(i + 1) {
                    assert_eq!(&it.next().unwrap().unwrap(), next);
                }
            }
            None => assert!(it.next().is_none()),
        }
    }
    // Seeking to an existing key and to a specific version.
    let mut it = table.iter();
    for i in (0..entries.len()).step_by(997) {
        let e = &entries[i];
        it.seek_entry(&e.key, e.seq);
        assert_eq!(&it.next().unwrap().unwrap(), e);
    }
    it.seek_to_first();
    assert_eq!(&it.next().unwrap().unwrap(), &entries[0]);

    assert_eq!(verify_table(fs, &path).unwrap(), props);
}

/// Keys inside one range: `present` has even numbers, `absent` odd ones.
fn numbered_key(i: u64) -> Vec<u8> {
    format!(
        "user:{:016x}",
        i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1 << 63
    )
    .into_bytes()
    .into_iter()
    .chain([(i % 2) as u8])
    .collect()
}

fn numbered_table(fs: SharedFs, path: &Path, policy: FilterPolicy, n: u64) -> Vec<Entry> {
    let mut entries: Vec<Entry> = (0..n)
        .map(|i| Entry::value(numbered_key(2 * i), i + 1, format!("v{i}")))
        .collect();
    entries.sort_by(|a, b| entry_order(&a.key, a.seq, &b.key, b.seq));
    let options = TableOptions {
        filter_policy: policy,
        ..TableOptions::default()
    };
    build(fs, path, options, &entries).unwrap();
    entries
}

#[test]
fn absent_keys_cost_reads_only_at_the_predicted_false_positive_rate() {
    const N: u64 = 100_000;
    let dir = tmpdir();
    let path = dir.path().join("t.sst");
    let fs: SharedFs = Arc::new(OsFileSystem);
    let entries = numbered_table(fs.clone(), &path, FilterPolicy::FalsePositiveRate(0.01), N);
    let counters = Arc::new(ReadCounters::new());
    let table = Table::open(fs, &path, counters.clone()).unwrap();
    let params = table.filter_params().unwrap();
    let predicted = params.predicted_false_positive_rate();
    assert!(predicted <= 0.01);

    let (first, last) = (&entries[0].key, &entries.last().unwrap().key);
    let mut inside = 0;
    for i in 0..N {
        let key = numbered_key(2 * i + 1);
        inside += u64::from(key > *first && key < *last);
        assert_eq!(table.get(&key, &KeyHash::of(&key)).unwrap(), None);
    }
    assert!(
        inside > N * 99 / 100,
        "absent keys lie inside the table's range"
    );
    let c = counters.snapshot();
    assert_eq!(c.filter_probes, N);
    assert_eq!(c.filter_negatives + c.filter_positives, N);
    assert_eq!(c.filter_true_positives, 0);
    assert!(c.data_block_reads <= c.filter_positives);
    let bound = 1.3 * predicted * N as f64 + 30.0;
    println!(
        "absent: {} block reads for {N} lookups (predicted rate {predicted}, bound {bound:.0}), {} bytes read",
        c.data_block_reads, c.bytes_read
    );
    assert!(
        (c.data_block_reads as f64) <= bound,
        "{} reads, bound {bound}",
        c.data_block_reads
    );

    // Present keys: one block read each, all true positives.
    let before = counters.snapshot();
    for e in &entries {
        assert_eq!(
            table.get(&e.key, &KeyHash::of(&e.key)).unwrap().as_ref(),
            Some(e)
        );
    }
    let c = counters.snapshot().since(&before);
    assert_eq!(c.filter_true_positives, N);
    assert_eq!(c.data_block_reads, N);
    assert_eq!(c.filter_false_positives(), 0);
    assert!(c.bytes_read >= N * 5);
}

#[test]
fn without_a_filter_each_absent_key_in_range_costs_one_block_read() {
    const N: u64 = 100_000;
    let dir = tmpdir();
    let path = dir.path().join("t.sst");
    let fs: SharedFs = Arc::new(OsFileSystem);
    let entries = numbered_table(fs.clone(), &path, FilterPolicy::Disabled, N);
    let counters = Arc::new(ReadCounters::new());
    let table = Table::open(fs.clone(), &path, counters.clone()).unwrap();
    assert!(table.filter().is_none());
    assert!(table.filter_params().is_none());
    assert_eq!(table.properties().filter, None);
    assert_eq!(table.properties().filter_size_bytes, 0);

    // The index sends every key up to its last separator to a block. That separator is the
    // shortest key at or after the table's last, `v` here (after `user:...`), so every
    // absent key, below the first key or past the last, costs a read as well as those
    // between them.
    let (first, last) = (&entries[0].key, &entries.last().unwrap().key);
    let (mut inside, mut up_to_last_separator) = (0, 0);
    for i in 0..N {
        let key = numbered_key(2 * i + 1);
        inside += u64::from(key > *first && key < *last);
        up_to_last_separator += u64::from(key.as_slice() <= b"v");
        assert_eq!(table.get(&key, &KeyHash::of(&key)).unwrap(), None);
    }
    assert!(
        inside > N * 99 / 100,
        "absent keys lie inside the table's range"
    );
    let c = counters.snapshot();
    assert_eq!(c.filter_probes, 0);
    assert_eq!(c.data_block_reads, up_to_last_separator);
    assert_eq!(c.data_block_reads, N);
    for e in entries.iter().step_by(101) {
        assert_eq!(
            table.get(&e.key, &KeyHash::of(&e.key)).unwrap().as_ref(),
            Some(e)
        );
    }
    assert_eq!(counters.snapshot().filter_true_positives, 0);
    verify_table(fs, &path).unwrap();
}

/// A small table of many blocks for the corruption tests.
fn small_entries() -> Vec<Entry> {
    let mut entries = Vec::new();
    for i in 0..40u32 {
        let key = format!("k{:03}", i * 3).into_bytes();
        entries.push(Entry::value(key.clone(), 100, format!("value-{i}")));
        if i % 5 == 0 {
            entries.push(Entry::tombstone(key.clone(), 50));
        }
        if i % 9 == 0 {
            entries.push(Entry::value(key, 10, Vec::new()));
        }
    }
    entries
}

fn small_options(policy: FilterPolicy) -> TableOptions {
    TableOptions {
        block_size: 96,
        restart_interval: 3,
        filter_policy: policy,
        // LZ4 by default: the corruption tests below then damage compressed blocks too.
        ..TableOptions::default()
    }
}

/// Opens the table at `path` and checks every answer it gives is either an error or right.
/// Returns whether any error was seen.
fn check_never_wrong(fs: &SharedMemFs, path: &Path, entries: &[Entry]) -> bool {
    let table = match Table::open(Arc::new(fs.clone()), path, Arc::new(ReadCounters::new())) {
        Ok(t) => t,
        Err(e) => {
            assert!(e.is_corruption(), "{e}");
            return true;
        }
    };
    let mut saw_error = false;
    for e in newest(entries) {
        match table.get(&e.key, &KeyHash::of(&e.key)) {
            Ok(got) => assert_eq!(got.as_ref(), Some(e), "wrong answer for {:?}", e.key),
            Err(err) => {
                assert!(err.is_corruption(), "{err}");
                saw_error = true;
            }
        }
    }
    for i in 0..130u32 {
        let key = format!("k{i:03}").into_bytes();
        if i % 3 != 0 || i >= 120 {
            match table.get(&key, &KeyHash::of(&key)) {
                Ok(got) => assert_eq!(got, None),
                Err(err) => {
                    assert!(err.is_corruption(), "{err}");
                    saw_error = true;
                }
            }
        }
    }
    let mut got = Vec::new();
    for r in table.iter() {
        match r {
            Ok(e) => got.push(e),
            Err(err) => {
                assert!(err.is_corruption(), "{err}");
                saw_error = true;
                break;
            }
        }
    }
    // What the iterator yielded before any error is a correct prefix.
    assert_eq!(got.as_slice(), &entries[..got.len()]);
    if !saw_error {
        assert_eq!(got.len(), entries.len());
    }
    saw_error
}

#[test]
fn every_single_byte_change_is_caught_or_harmless() {
    for policy in [
        FilterPolicy::FalsePositiveRate(0.01),
        FilterPolicy::Disabled,
    ] {
        let fs = SharedMemFs::default();
        let path = PathBuf::from("/db/000007.sst");
        let entries = small_entries();
        build(Arc::new(fs.clone()), &path, small_options(policy), &entries).unwrap();
        let pristine = fs.0.get(&path).unwrap().to_vec();
        let table =
            Table::open(Arc::new(fs.clone()), &path, Arc::new(ReadCounters::new())).unwrap();
        assert!(table.data_blocks() >= 8, "{} blocks", table.data_blocks());
        assert!(!check_never_wrong(&fs, &path, &entries));
        drop(table);

        let mut detected_by_get_or_iter = 0;
        for offset in 0..pristine.len() {
            for mask in [0x01u8, 0xff] {
                let mut bytes = pristine.clone();
                bytes[offset] ^= mask;
                fs.0.put(&path, bytes);
                let saw_error = check_never_wrong(&fs, &path, &entries);
                if saw_error
                    && Table::open(Arc::new(fs.clone()), &path, Arc::new(ReadCounters::new()))
                        .is_ok()
                {
                    detected_by_get_or_iter += 1;
                }
                // Every byte is under a checksum, so the full check always notices.
                let err = verify_table(Arc::new(fs.clone()), &path)
                    .expect_err("verify must notice every changed byte");
                match err {
                    Error::Corruption {
                        file, offset: at, ..
                    } => {
                        assert_eq!(file, path);
                        let at = at.expect("offset named") as usize;
                        assert!(at <= offset, "block at {at} for a change at {offset}");
                    }
                    other => panic!("unexpected error {other}"),
                }
            }
        }
        println!(
            "{policy:?}: {} bytes, {} single-byte changes, {detected_by_get_or_iter} of them \
             opened fine and were caught by get/iter, all caught by verify_table",
            pristine.len(),
            2 * pristine.len()
        );
        // Changes inside data blocks pass the open and are caught when the block is read.
        assert!(detected_by_get_or_iter > 0);
    }
}

#[test]
fn every_truncation_fails_to_open() {
    let fs = SharedMemFs::default();
    let path = PathBuf::from("/db/000008.sst");
    let entries = small_entries();
    build(
        Arc::new(fs.clone()),
        &path,
        small_options(FilterPolicy::default()),
        &entries,
    )
    .unwrap();
    let pristine = fs.0.get(&path).unwrap().to_vec();
    for len in 0..pristine.len() {
        fs.0.put(&path, pristine[..len].to_vec());
        let err = Table::open(Arc::new(fs.clone()), &path, Arc::new(ReadCounters::new()))
            .expect_err("a truncated table must not open");
        assert!(err.is_corruption(), "length {len}: {err}");
        assert!(err.to_string().contains("000008.sst"), "{err}");
    }
    // Extra bytes at the end are no better.
    let mut longer = pristine.clone();
    longer.push(0);
    fs.0.put(&path, longer);
    assert!(Table::open(Arc::new(fs.clone()), &path, Arc::new(ReadCounters::new())).is_err());
}

#[test]
fn builder_rejects_entries_out_of_order() {
    let fs = SharedMemFs::default();
    let path = PathBuf::from("/db/1.sst");
    let mut b =
        TableBuilder::new(Arc::new(fs.clone()), &path, TableOptions::default(), 10).unwrap();
    b.add(&Entry::value(b"b".to_vec(), 5, b"x".to_vec()))
        .unwrap();
    let bad = [
        Entry::value(b"a".to_vec(), 9, b"x".to_vec()), // smaller key
        Entry::value(b"b".to_vec(), 5, b"y".to_vec()), // same key, same seq
        Entry::value(b"b".to_vec(), 6, b"y".to_vec()), // same key, newer seq
        Entry::tombstone(b"".to_vec(), 1),             // empty key sorts first
    ];
    for e in &bad {
        match b.add(e) {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains("order"), "{msg}"),
            other => panic!("{e:?} accepted: {other:?}"),
        }
    }
    // A tombstone with a value is refused too.
    assert!(matches!(
        b.add_raw(b"c", 1, ValueKind::Tombstone, b"v"),
        Err(Error::InvalidArgument(_))
    ));
    // The builder is still usable after rejecting bad input.
    b.add(&Entry::tombstone(b"b".to_vec(), 4)).unwrap();
    b.add(&Entry::value(b"c".to_vec(), 1, b"z".to_vec()))
        .unwrap();
    let props = b.finish().unwrap();
    assert_eq!(
        (props.entries, props.distinct_keys, props.tombstones),
        (3, 2, 1)
    );
    let table = Table::open(Arc::new(fs.clone()), &path, Arc::new(ReadCounters::new())).unwrap();
    let all: Vec<Entry> = table.iter().collect::<Result<_>>().unwrap();
    assert_eq!(
        all,
        vec![
            Entry::value(b"b".to_vec(), 5, b"x".to_vec()),
            Entry::tombstone(b"b".to_vec(), 4),
            Entry::value(b"c".to_vec(), 1, b"z".to_vec()),
        ]
    );
}

#[test]
fn empty_table_round_trips() {
    let fs = SharedMemFs::default();
    let path = PathBuf::from("/db/empty.sst");
    build(Arc::new(fs.clone()), &path, TableOptions::default(), &[]).unwrap();
    let table = Table::open(Arc::new(fs.clone()), &path, Arc::new(ReadCounters::new())).unwrap();
    assert_eq!(table.properties().entries, 0);
    assert_eq!(table.data_blocks(), 0);
    assert_eq!(table.get(b"a", &KeyHash::of(b"a")).unwrap(), None);
    assert!(table.iter().next().is_none());
    assert!(table.iter_from(b"").next().is_none());
    verify_table(Arc::new(fs), &path).unwrap();
}

#[test]
fn abandon_and_drop_leave_no_files_behind() {
    let fs = SharedMemFs::default();
    let path = PathBuf::from("/db/2.sst");
    let mut b = TableBuilder::new(Arc::new(fs.clone()), &path, TableOptions::default(), 1).unwrap();
    b.add(&Entry::value(b"k".to_vec(), 1, b"v".to_vec()))
        .unwrap();
    assert!(fs.exists(&temp_path(&path)));
    b.abandon().unwrap();
    assert!(fs.list(Path::new("/db")).unwrap().is_empty());

    let b = TableBuilder::new(Arc::new(fs.clone()), &path, TableOptions::default(), 1).unwrap();
    drop(b);
    assert!(fs.list(Path::new("/db")).unwrap().is_empty());
}

#[test]
fn bad_options_are_invalid_arguments() {
    let fs: SharedFs = Arc::new(SharedMemFs::default());
    let path = Path::new("/db/3.sst");
    for options in [
        TableOptions {
            block_size: 0,
            ..TableOptions::default()
        },
        TableOptions {
            restart_interval: 0,
            ..TableOptions::default()
        },
        TableOptions {
            filter_policy: FilterPolicy::FalsePositiveRate(1.5),
            ..TableOptions::default()
        },
        TableOptions {
            filter_policy: FilterPolicy::FalsePositiveRate(f64::NAN),
            ..TableOptions::default()
        },
    ] {
        assert!(matches!(
            TableBuilder::new(fs.clone(), path, options, 0),
            Err(Error::InvalidArgument(_))
        ));
    }
}

#[test]
fn a_table_is_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<Table>();
    assert_send_sync::<Arc<Table>>();

    let fs = SharedMemFs::default();
    let path = PathBuf::from("/db/4.sst");
    let entries = small_entries();
    build(
        Arc::new(fs.clone()),
        &path,
        small_options(FilterPolicy::default()),
        &entries,
    )
    .unwrap();
    let counters = Arc::new(ReadCounters::new());
    let table = Arc::new(Table::open(Arc::new(fs), &path, counters.clone()).unwrap());
    let newest: Vec<Entry> = newest(&entries).into_iter().cloned().collect();
    std::thread::scope(|s| {
        for _ in 0..2 {
            let table = table.clone();
            let newest = &newest;
            s.spawn(move || {
                for e in newest {
                    assert_eq!(
                        table.get(&e.key, &KeyHash::of(&e.key)).unwrap().as_ref(),
                        Some(e)
                    );
                }
            });
        }
    });
    assert_eq!(
        counters.snapshot().filter_true_positives,
        2 * newest.len() as u64
    );
}

/// A file system whose writes or syncs fail on demand.
#[derive(Clone, Default)]
struct FaultyFs {
    inner: SharedMemFs,
    fail_append_after: Option<usize>,
    fail_sync: bool,
}

struct FaultyWritable {
    inner: Box<dyn WritableFile>,
    appends_left: Option<usize>,
    fail_sync: bool,
}

impl WritableFile for FaultyWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if let Some(left) = self.appends_left.as_mut() {
            if *left == 0 {
                return Err(Error::io("appending", std::io::Error::other("disk full")));
            }
            *left -= 1;
        }
        self.inner.append(data)
    }
    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> Result<()> {
        if self.fail_sync {
            return Err(Error::io("syncing", std::io::Error::other("EIO")));
        }
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl FileSystem for FaultyFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(FaultyWritable {
            inner: self.inner.create(path)?,
            appends_left: self.fail_append_after,
            fail_sync: self.fail_sync,
        }))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.open_append(path)
    }
    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open_read(path)
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        self.inner.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }

    fn lock_shared(&self, path: &Path) -> Result<Option<Box<dyn FileLock>>> {
        self.inner.lock_shared(path)
    }
}

#[test]
fn failed_writes_and_syncs_leave_no_table_behind() {
    let entries = small_entries();
    let path = PathBuf::from("/db/5.sst");
    for (fail_append_after, fail_sync) in [
        (Some(0), false),
        (Some(3), false),
        (Some(20), false),
        (None, true),
    ] {
        let fs = FaultyFs {
            fail_append_after,
            fail_sync,
            ..FaultyFs::default()
        };
        let err = build(
            Arc::new(fs.clone()),
            &path,
            small_options(FilterPolicy::default()),
            &entries,
        )
        .expect_err("the fault must surface");
        assert!(matches!(err, Error::Io { .. }), "{err}");
        assert!(
            fs.list(Path::new("/db")).unwrap().is_empty(),
            "no table and no temporary file after {err}"
        );
    }
    // After a failed append the builder refuses further work.
    let fs = FaultyFs {
        fail_append_after: Some(0),
        ..FaultyFs::default()
    };
    let mut b = TableBuilder::new(
        Arc::new(fs),
        &path,
        small_options(FilterPolicy::default()),
        0,
    )
    .unwrap();
    let mut first_err = None;
    for e in &entries {
        if let Err(err) = b.add(e) {
            first_err = Some(err);
            break;
        }
    }
    assert!(matches!(first_err, Some(Error::Io { .. })));
    assert!(matches!(
        b.add(&Entry::value(b"zzz".to_vec(), 1, b"v".to_vec())),
        Err(Error::WritesRefused { .. })
    ));
    assert!(matches!(b.finish(), Err(Error::WritesRefused { .. })));
}

// ---------------------------------------------------------------------------------------
// The page cache: a filter read into memory leaves the file's cache.

/// Which pages of the file at `path` are in the page cache, by `mincore` over a map of it
/// (a map faults nothing in until it is touched, and this one never is).
#[cfg(linux_extras)]
fn pages_cached(path: &Path, page: usize) -> Vec<bool> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len() as usize;
    let mut cached = vec![0u8; len.div_ceil(page)];
    // SAFETY: a fresh read-only map of an open file, unmapped below; `cached` has a byte for
    // each of its pages, as mincore requires.
    unsafe {
        let map = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(map, libc::MAP_FAILED);
        assert_eq!(libc::mincore(map, len, cached.as_mut_ptr()), 0);
        libc::munmap(map, len);
    }
    cached.iter().map(|b| b & 1 == 1).collect()
}

#[cfg(linux_extras)]
#[test]
fn opening_a_table_leaves_its_filter_out_of_the_page_cache() {
    // Under the target directory, not /tmp: a tmpfs keeps every page whatever it is told.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("000001.sst");
    let fs: SharedFs = Arc::new(OsFileSystem);
    let keys = 1_000_000u64;
    let mut b = TableBuilder::new(fs.clone(), &path, TableOptions::default(), keys).unwrap();
    for i in 0..keys {
        let key = format!("key{i:012}");
        b.add(&Entry::value(key.into_bytes(), i + 1, vec![7u8; 4]))
            .unwrap();
    }
    let props = b.finish().unwrap();
    assert!(props.filter_size_bytes > 1 << 20, "{props:?}");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let first_filter_page = props.data_size.div_ceil(page) as usize;
    let end_filter_page = ((props.data_size + props.filter_size_bytes) / page) as usize;

    // Every page read through the cache first; the table then reads its footer, index and
    // filter, and holds the filter.
    std::fs::read(&path).unwrap();
    let before = pages_cached(&path, page as usize);
    assert!(before.iter().all(|&c| c), "the whole file was just read");
    let table = Table::open(fs, &path, Arc::new(ReadCounters::new())).unwrap();
    assert!(table.filter().is_some());
    let after = pages_cached(&path, page as usize);

    // The kernel keeps a folio (a run of pages it caches as one) that reaches beyond the
    // range whole, so pages near the filter's ends may stay; but not most of them.
    let filter_pages = &after[first_filter_page..end_filter_page];
    let still = filter_pages.iter().filter(|&&c| c).count();
    assert!(
        still * 4 < filter_pages.len(),
        "{still} of the filter's {} pages still cached",
        filter_pages.len()
    );
    // The data blocks stay where they were, but for a folio's length at the filter's start:
    // the hint covered the filter alone.
    let near = (256 * 1024 / page) as usize;
    let data = &after[..first_filter_page.saturating_sub(near)];
    assert!(data.len() > 1000);
    assert!(data.iter().all(|&c| c));
}
