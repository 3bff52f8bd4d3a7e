//! Value separation end to end: large values go to the value log and read back through gets and
//! scans; garbage collection reclaims space without losing a value, waits for snapshots, and
//! aborts cleanly on a full disk; damaged or missing segments are corruption errors that name
//! the segment and offset, never wrong data.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{contents, open_mem};
use attune_kv::env::{Env, FaultKind, MemEnv};
use attune_kv::{Error, Options, ReadOptions, DB};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn options() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        min_blob_size: 256,
        blob_file_size: 32 << 10,
        // Collection only on demand, so each test controls when it runs.
        blob_gc_space_amp: 0.0,
        wal_sync_interval_ms: 0,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Large values for even keys, small ones for odd keys; `round` makes each overwrite distinct.
fn value(i: u32, round: u32) -> Vec<u8> {
    let len = if i.is_multiple_of(2) {
        300 + (i % 7) * 100
    } else {
        40
    };
    let mut v = format!("r{round}-i{i}-").into_bytes();
    v.resize(len as usize, b'a' + (i % 26) as u8);
    v
}

fn mem_db(env: &MemEnv, opts: Options) -> DB {
    open_mem(env, opts).unwrap()
}

fn check_all(db: &DB, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "key {k:?}");
    }
    assert_eq!(&contents(db), model);
}

fn vlog_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "vlog"))
        .collect();
    v.sort();
    v
}

#[test]
fn large_values_live_in_the_value_log_and_read_back() {
    let env = MemEnv::new();
    let db = mem_db(&env, options());
    let mut model = BTreeMap::new();
    for i in 0..400 {
        db.put(&key(i), &value(i, 0)).unwrap();
        model.insert(key(i), value(i, 0));
    }
    check_all(&db, &model);
    db.flush().unwrap();
    check_all(&db, &model);
    let s = db.stats();
    assert!(
        s.blob_bytes > 200 * 300,
        "value log holds the large values: {s:?}"
    );
    assert!(s.blob_files.len() > 1, "32 KiB segments rotate");
    assert!(s.blob_bytes_written > 0 && s.blob_reads > 0);
    // Reverse scans resolve pointers too.
    let mut it = db.iter(&ReadOptions::default()).expect("open an iterator");
    it.seek_to_last();
    assert_eq!(it.value(), &value(399, 0)[..]);
    it.prev();
    assert_eq!(it.value(), &value(398, 0)[..]);
}

#[test]
fn tables_of_fixed_size_keys_and_pointers_are_fixed_layout() {
    let env = MemEnv::new();
    let db = mem_db(
        &env,
        Options {
            min_blob_size: 0, // every value separated: every record is key + pointer
            ..options()
        },
    );
    for i in 0..2000 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    let s = db.stats();
    assert!(!s.fixed_layout_files.is_empty(), "{s:?}");
    // Mixed inline and separated values are not fixed-size.
    let env = MemEnv::new();
    let db = mem_db(&env, options());
    for i in 0..2000 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    assert!(db.stats().fixed_layout_files.is_empty());
}

#[test]
fn gc_reclaims_overwritten_values_and_loses_nothing() {
    let env = MemEnv::new();
    let db = mem_db(&env, options());
    let mut model = BTreeMap::new();
    for round in 0..4 {
        for i in 0..300 {
            db.put(&key(i), &value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
    }
    for i in (0..300).step_by(5) {
        db.delete(&key(i)).unwrap();
        model.remove(&key(i));
    }
    // Compaction drops the shadowed pointers and counts their records as garbage.
    db.compact_range(None, None).unwrap();
    let before = db.stats();
    assert!(before.blob_garbage_bytes > 0, "{before:?}");
    let report = db.gc_with_ratio(0.2).unwrap();
    assert!(report.segments_collected > 0, "{report:?}");
    let after = db.stats();
    assert!(
        after.blob_bytes < before.blob_bytes / 2,
        "space reclaimed: {} -> {}",
        before.blob_bytes,
        after.blob_bytes
    );
    assert!(after.gc_bytes_reclaimed > 0 && after.gc_max_pause_micros > 0);
    check_all(&db, &model);
    drop(db);
    let db = mem_db(&env, options());
    check_all(&db, &model);
}

#[test]
fn values_gc_moved_do_not_depend_on_the_log() {
    // Collection moves live values through the write path. Were the moves only in the log when
    // the old segment went, a damaged log would lose values written long before it: every
    // value here was flushed and compacted before collection, so emptying the logs after it
    // must lose nothing.
    let env = MemEnv::new();
    let db = mem_db(&env, options());
    let mut model = BTreeMap::new();
    for round in 0..3 {
        for i in 0..300 {
            if round == 0 || i % 3 == 0 {
                db.put(&key(i), &value(i, round)).unwrap();
                model.insert(key(i), value(i, round));
            }
        }
    }
    db.compact_range(None, None).unwrap();
    let report = db.gc_with_ratio(0.2).unwrap();
    assert!(
        report.segments_collected > 0 && report.records_rewritten > 0,
        "{report:?}"
    );
    db.close().unwrap();
    let logs: Vec<String> = env
        .list_dir(Path::new("/db"))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .collect();
    assert!(!logs.is_empty());
    for name in logs {
        let path = Path::new("/db").join(name);
        let w = env.new_writable(&path).unwrap();
        drop(w);
        assert_eq!(env.file_size(&path).unwrap(), 0);
    }
    let db = mem_db(&env, options());
    check_all(&db, &model);
}

#[test]
fn gc_reclaims_garbage_in_the_active_segment_without_waiting_for_it_to_fill() {
    // Segments far larger than the data: every overwrite lands in the one active segment, which
    // a collection used to skip until it filled.
    let env = MemEnv::new();
    let opts = Options {
        blob_file_size: 64 << 20,
        // No memtable switch before the explicit flush, so nothing rolls the segment over.
        write_buffer_size: 64 << 20,
        ..options()
    };
    let db = mem_db(&env, opts.clone());
    let mut model = BTreeMap::new();
    for round in 0..3 {
        for i in 0..400 {
            db.put(&key(i), &value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let before = db.stats();
    assert_eq!(before.blob_files.iter().filter(|b| !b.sealed).count(), 1);
    assert!(
        before.blob_garbage_bytes > before.blob_bytes / 2,
        "{before:?}"
    );
    // Below the ratio: nothing is switched out or collected.
    let none = db.gc_with_ratio(0.99).unwrap();
    assert_eq!(none.segments_collected, 0, "{none:?}");
    assert_eq!(db.stats().blob_files.len(), before.blob_files.len());
    let report = db.gc().unwrap();
    assert_eq!(report.segments_collected, 1, "{report:?}");
    let after = db.stats();
    assert!(
        after.blob_bytes * 2 < before.blob_bytes,
        "space reclaimed: {} -> {}",
        before.blob_bytes,
        after.blob_bytes
    );
    check_all(&db, &model);
    // A second gc() finds no garbage to seal for: it switches nothing out.
    let files = after.blob_files.len();
    assert_eq!(db.gc().unwrap().segments_collected, 0);
    assert_eq!(db.stats().blob_files.len(), files);
    drop(db);
    let db = mem_db(&env, opts);
    check_all(&db, &model);
}

#[test]
fn gc_keeps_a_segment_while_a_snapshot_can_read_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = DB::open(&dir, options()).unwrap();
    for i in 0..200 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    let snap = db.snapshot().unwrap();
    let old_files = vlog_files(&dir);
    for i in 0..200 {
        db.put(&key(i), &value(i, 1)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.gc_with_ratio(0.0).unwrap();
    // The old segments are still there: the snapshot reads them.
    for f in &old_files {
        assert!(f.exists(), "{f:?} deleted under a live snapshot");
    }
    let ro = ReadOptions {
        snapshot: Some(snap.sequence()),
        ..Default::default()
    };
    for i in (0..200).step_by(2) {
        assert_eq!(db.get_opt(&key(i), &ro).unwrap(), Some(value(i, 0)));
    }
    drop(snap);
    db.gc_with_ratio(0.0).unwrap();
    let gone = old_files.iter().filter(|f| !f.exists()).count();
    assert!(
        gone > 0,
        "no old segment deleted after the snapshot was released"
    );
    for i in 0..200 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, 1)));
    }
}

#[test]
fn disk_full_during_gc_aborts_and_keeps_the_old_segments() {
    for fail_after in [0, 1, 3, 10] {
        let env = MemEnv::new();
        let db = mem_db(&env, options());
        let mut model = BTreeMap::new();
        for round in 0..3 {
            for i in 0..200 {
                db.put(&key(i), &value(i, round)).unwrap();
                model.insert(key(i), value(i, round));
            }
        }
        db.compact_range(None, None).unwrap();
        env.fail_after(FaultKind::Write, fail_after);
        let r = db.gc_with_ratio(0.0);
        assert!(r.is_err(), "fail_after {fail_after}: the fault never fired");
        env.clear_faults();
        // Nothing lost, in this handle (when it still serves reads) and after reopening.
        if db.get(&key(0)).is_ok() {
            for (k, v) in &model {
                assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
            }
        }
        drop(db);
        let db = mem_db(&env, options());
        check_all(&db, &model);
        let report = db.gc_with_ratio(0.0).unwrap();
        assert!(report.segments_collected > 0);
        check_all(&db, &model);
    }
}

#[test]
fn damaged_value_log_record_is_corruption_naming_segment_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut model = BTreeMap::new();
    {
        let db = DB::open(&dir, options()).unwrap();
        for i in 0..200 {
            db.put(&key(i), &value(i, 0)).unwrap();
            model.insert(key(i), value(i, 0));
        }
        db.close().unwrap();
    }
    let seg = vlog_files(&dir).into_iter().next().unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x5a;
    std::fs::write(&seg, &bytes).unwrap();
    let db = DB::open(&dir, options()).unwrap();
    let mut corrupt = 0;
    for (k, v) in &model {
        match db.get(k) {
            Ok(got) => assert_eq!(got.as_ref(), Some(v), "wrong data for {k:?}"),
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, seg);
                assert!(
                    offset <= at as u64,
                    "offset {offset} names the record start"
                );
                corrupt += 1;
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    assert_eq!(corrupt, 1, "exactly the damaged record fails");
    // A scan stops at the damaged record with the same error.
    let mut it = db.iter(&ReadOptions::default()).expect("open an iterator");
    it.seek_to_first();
    while it.valid() {
        it.next();
    }
    assert!(matches!(it.status(), Err(Error::Corruption { .. })));
    // Collection refuses to move a damaged segment and keeps it.
    db.compact_range(None, None).unwrap();
    assert!(db.gc_with_ratio(0.0).is_err());
    assert!(seg.exists());
}

#[test]
fn missing_segment_is_refused_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    {
        let db = DB::open(&dir, options()).unwrap();
        for i in 0..100 {
            db.put(&key(i), &value(i, 0)).unwrap();
        }
        db.close().unwrap();
    }
    let seg = vlog_files(&dir).into_iter().next().unwrap();
    std::fs::remove_file(&seg).unwrap();
    let e = DB::open(&dir, options()).err().expect("must refuse");
    assert!(matches!(e, Error::Corruption { .. }), "{e}");
    assert!(e.to_string().contains("missing"), "{e}");
}

#[test]
fn automatic_gc_runs_when_space_amplification_crosses_the_threshold() {
    let env = MemEnv::new();
    let db = mem_db(
        &env,
        Options {
            blob_gc_space_amp: 1.5,
            blob_gc_garbage_ratio: 0.3,
            ..options()
        },
    );
    let mut model = BTreeMap::new();
    for round in 0..6 {
        for i in 0..200 {
            db.put(&key(i), &value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
        db.compact_range(None, None).unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while db.stats().gc_segments_collected == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let s = db.stats();
    assert!(s.gc_segments_collected > 0, "{s:?}");
    check_all(&db, &model);
}

#[test]
fn a_flush_finds_the_garbage_its_overwrites_and_deletes_make_before_any_compaction() {
    let env = MemEnv::new();
    let db = mem_db(
        &env,
        Options {
            // Collection on, but far from its threshold: only the accounting is under test.
            blob_gc_space_amp: 100.0,
            l0_compaction_trigger: 8,
            l0_slowdown_writes_trigger: 8,
            l0_stop_writes_trigger: 12,
            ..options()
        },
    );
    let separated: Vec<u32> = (0..100).filter(|i| i % 2 == 0).collect();
    for i in 0..100 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.stats().blob_garbage_bytes, 0);
    // Overwrite half of the separated values and delete the other half: every one of their
    // first versions is now garbage, and the flush alone must know it.
    for (n, &i) in separated.iter().enumerate() {
        if n % 2 == 0 {
            db.put(&key(i), &value(i, 1)).unwrap();
        } else {
            db.delete(&key(i)).unwrap();
        }
    }
    db.flush().unwrap();
    let s = db.stats();
    assert_eq!(s.level_files[0], 2, "no compaction ran: {s:?}");
    let first_round: u64 = separated.iter().map(|&i| value(i, 0).len() as u64).sum();
    assert!(
        s.blob_garbage_bytes >= first_round,
        "flush found {} garbage bytes, the first versions hold {first_round}",
        s.blob_garbage_bytes
    );
    // Records carry a header and the key besides the value: the estimate stays below that.
    let with_headers: u64 = separated
        .iter()
        .map(|&i| (value(i, 0).len() + key(i).len() + 64) as u64)
        .sum();
    assert!(s.blob_garbage_bytes <= with_headers, "{s:?}");
    // What it found is what collection then reclaims, and nothing live is lost.
    let mut model = BTreeMap::new();
    for i in 0..100 {
        if !separated.contains(&i) || separated.iter().position(|&x| x == i).unwrap() % 2 == 0 {
            let round = u32::from(separated.contains(&i));
            model.insert(key(i), value(i, round));
        }
    }
    // Collected by this call or already by background collection (the flush thread may run
    // one once the flush has made the garbage known): either way the count is cumulative.
    let before = db.stats();
    let r = db.gc_with_ratio(0.1).unwrap();
    let after = db.stats();
    assert!(
        after.gc_segments_collected > 0,
        "{r:?}; before: gc runs {}, segments {:?}; after: {:?}",
        before.gc_runs,
        before.blob_files,
        after.blob_files
    );
    check_all(&db, &model);
}

#[test]
fn sustained_overwrites_settle_under_the_space_limit() {
    let env = MemEnv::new();
    let db = mem_db(
        &env,
        Options {
            blob_gc_space_amp: 1.5,
            ..options()
        },
    );
    let mut model = BTreeMap::new();
    for round in 0..20 {
        for i in 0..200 {
            db.put(&key(i), &value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
    }
    db.flush().unwrap();
    // The collector catches up once writes stop; what it aims for is under the limit.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while db.stats().blob_space_amp > 1.5 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let s = db.stats();
    assert!(s.blob_space_amp <= 1.5, "{s:?}");
    assert!(s.gc_segments_collected > 0, "{s:?}");
    check_all(&db, &model);
}

#[test]
fn a_read_only_open_counts_the_unsealed_segment_at_its_length() {
    let env = MemEnv::new();
    let db = mem_db(&env, options());
    for i in 0..200 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    let written = db.stats().blob_bytes;
    db.close().unwrap();
    let ro = mem_db(
        &env,
        Options {
            read_only: true,
            ..options()
        },
    );
    let s = ro.stats();
    assert!(written > 0);
    // Every segment, sealed or not, counts at what it holds: no segment reads as empty.
    assert!(
        s.blob_files.iter().all(|b| b.size > 0),
        "{:?}",
        s.blob_files
    );
    assert!(
        s.blob_bytes >= written,
        "read-only {} < written {written}",
        s.blob_bytes
    );
}

/// Overwrites of a data set smaller than the write buffer: (flushes, final value-log bytes).
fn overwrite_small_set(space_amp: f64) -> (u64, u64) {
    let env = MemEnv::new();
    let db = mem_db(
        &env,
        Options {
            write_buffer_size: 8 << 20,
            blob_file_size: 64 << 20,
            blob_gc_space_amp: space_amp,
            ..options()
        },
    );
    let big = |i: u32, round: u32| {
        let mut v = format!("r{round}-i{i}-").into_bytes();
        v.resize(4096, b'v');
        v
    };
    for round in 0..10 {
        for i in 0..1000 {
            db.put(&key(i), &big(i, round)).unwrap();
        }
    }
    for i in 0..1000 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(big(i, 9)));
    }
    let s = db.stats();
    (s.flushes, s.blob_bytes)
}

#[test]
fn a_memtable_hiding_overwritten_values_flushes_before_it_is_full() {
    // 4 MB live, 40 MB written, an 8 MiB write buffer: filling it would flush 4 times.
    let (flushes_off, _) = overwrite_small_set(0.0);
    assert!(flushes_off <= 5, "{flushes_off}");
    // With collection on, once a flush has seen overwrites, the memtable is flushed whenever the
    // garbage it hides would take the log past half the room the limit leaves.
    let (flushes_on, _) = overwrite_small_set(1.5);
    assert!(flushes_on >= 8, "{flushes_on} flushes (off: {flushes_off})");
}

/// An environment whose value-log reads are slow (as from a device), so that scans prefetch.
struct SlowVlogEnv(MemEnv);

struct SlowFile(Arc<dyn attune_kv::env::RandomAccessFile>);

impl attune_kv::env::RandomAccessFile for SlowFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> attune_kv::Result<()> {
        std::thread::sleep(std::time::Duration::from_micros(60));
        self.0.read_exact_at(buf, offset)
    }
    fn size(&self) -> u64 {
        self.0.size()
    }
}

impl Env for SlowVlogEnv {
    fn create_dir_all(&self, dir: &Path) -> attune_kv::Result<()> {
        self.0.create_dir_all(dir)
    }
    fn new_writable(&self, p: &Path) -> attune_kv::Result<Box<dyn attune_kv::env::WritableFile>> {
        self.0.new_writable(p)
    }
    fn new_appendable(&self, p: &Path) -> attune_kv::Result<Box<dyn attune_kv::env::WritableFile>> {
        self.0.new_appendable(p)
    }
    fn open_random(
        &self,
        p: &Path,
    ) -> attune_kv::Result<Arc<dyn attune_kv::env::RandomAccessFile>> {
        let f = self.0.open_random(p)?;
        if p.extension().is_some_and(|x| x == "vlog") {
            Ok(Arc::new(SlowFile(f)))
        } else {
            Ok(f)
        }
    }
    fn read_all(&self, p: &Path) -> attune_kv::Result<Vec<u8>> {
        self.0.read_all(p)
    }
    fn file_size(&self, p: &Path) -> attune_kv::Result<u64> {
        self.0.file_size(p)
    }
    fn exists(&self, p: &Path) -> bool {
        self.0.exists(p)
    }
    fn list_dir(&self, d: &Path) -> attune_kv::Result<Vec<String>> {
        self.0.list_dir(d)
    }
    fn remove_file(&self, p: &Path) -> attune_kv::Result<()> {
        self.0.remove_file(p)
    }
    fn rename(&self, a: &Path, b: &Path) -> attune_kv::Result<()> {
        self.0.rename(a, b)
    }
    fn sync_dir(&self, d: &Path) -> attune_kv::Result<()> {
        self.0.sync_dir(d)
    }
    fn lock(&self, p: &Path) -> attune_kv::Result<Box<dyn attune_kv::env::FileLock>> {
        self.0.lock(p)
    }
    fn now_micros(&self) -> u64 {
        self.0.now_micros()
    }
}

#[test]
fn scans_over_slow_value_reads_prefetch_ahead_and_stay_correct() {
    let env = Arc::new(SlowVlogEnv(MemEnv::new()));
    let opts = Options {
        blob_prefetch_depth: 8,
        ..options()
    };
    let db = DB::open_with_env(env.clone() as Arc<dyn Env>, Path::new("/db"), opts).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..300 {
        db.put(&key(i), &value(i, 0)).unwrap();
        model.insert(key(i), value(i, 0));
    }
    db.flush().unwrap();
    // Bounded scans from several points, forward with a step back now and then.
    for start in [0u32, 57, 150, 290] {
        let mut it = db.iter(&ReadOptions::default()).expect("open an iterator");
        it.set_bounds(Some(key(start)), Some(key(start + 40)));
        it.seek_to_first();
        let mut want = model.range(key(start)..key(start + 40));
        let mut n = 0;
        while it.valid() {
            let (k, v) = want.next().unwrap();
            assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
            it.next();
            n += 1;
            if n == 20 {
                it.prev();
                it.next();
            }
        }
        it.status().unwrap();
        assert!(want.next().is_none());
    }
    let s = db.stats();
    assert!(
        s.blob_prefetches > 0,
        "slow reads did not start read-ahead: {s:?}"
    );
}

#[test]
fn segments_switch_without_the_writer_waiting_and_close_sealed_at_their_length() {
    // Real files: segments are written through a memory map of reserved space, switched to a
    // spare made ahead, and sealed by the flush thread.
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        blob_file_size: 64 << 10,
        ..options()
    };
    let mut model = BTreeMap::new();
    {
        let db = DB::open(dir.path(), opts.clone()).unwrap();
        for round in 0..3 {
            for i in 0..400 {
                db.put(&key(i), &value(i, round)).unwrap();
                model.insert(key(i), value(i, round));
            }
        }
        check_all(&db, &model);
        let s = db.stats();
        assert!(s.blob_files.len() >= 4, "64 KiB segments rotate: {s:?}");
        db.close().unwrap();
    }
    let db = DB::open(dir.path(), opts).unwrap();
    check_all(&db, &model);
    let s = db.stats();
    let files = vlog_files(dir.path());
    // No spare segment outlives the close, and no segment keeps space reserved past its end.
    assert_eq!(files.len(), s.blob_files.len(), "{files:?} vs {s:?}");
    for b in &s.blob_files {
        let len = std::fs::metadata(dir.path().join(format!("{:06}.vlog", b.number)))
            .unwrap()
            .len();
        assert!(b.sealed, "{b:?}");
        assert_eq!(len, b.size, "segment {} on disk vs sealed length", b.number);
    }
    db.verify().unwrap();
}

#[test]
fn segments_a_crash_left_without_records_leave_the_manifest_at_open() {
    let env = MemEnv::new();
    let opts = Options {
        blob_file_size: 64 << 10,
        // The memtable holds all 200 values: the explicit flush is the only switch.
        write_buffer_size: 1 << 20,
        ..options()
    };
    let db = mem_db(&env, opts.clone());
    let mut model = BTreeMap::new();
    // Past three quarters of the first segment: the flush thread makes a spare ahead (and the
    // flush, past half a segment, rolls over to it, leaving it empty).
    for i in 0..200 {
        db.put(&key(i), &value(i, 0)).unwrap();
        model.insert(key(i), value(i, 0));
    }
    db.flush().unwrap(); // fsyncs the value log: everything above is durable
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while db.stats().blob_files.len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // The segment holding the values and at least one without records: the spare, and (when
    // the flush thread has already run again) the spare made ahead of that one. Which of these
    // the crash finds depends on the flush thread's timing; every one without records must go.
    let before = db.stats().blob_files.len();
    assert!(
        (2..=3).contains(&before),
        "active segment and its spare: {before}"
    );
    env.power_off();
    drop(db);
    env.crash();
    let db = mem_db(&env, opts);
    check_all(&db, &model);
    let s = db.stats();
    assert_eq!(s.blob_files.len(), 1, "the empty spare is gone: {s:?}");
    assert!(s.blob_files.iter().all(|b| b.size > 16), "{s:?}");
    let files = env.list_dir(Path::new("/db")).unwrap();
    let segments = files.iter().filter(|n| n.ends_with(".vlog")).count();
    assert_eq!(segments, 1, "{files:?}");
    db.verify().unwrap();
}

/// One segment large enough for every value of these tests, so the segment stays unsealed.
fn one_segment_options() -> Options {
    Options {
        blob_file_size: 4 << 20,
        ..options()
    }
}

/// Writes `n` large values and flushes them into a table (which fsyncs the value log first),
/// then closes; returns the model and the only segment's path.
fn flushed_large_values(dir: &Path, n: u32) -> (BTreeMap<Vec<u8>, Vec<u8>>, PathBuf) {
    let mut model = BTreeMap::new();
    let db = DB::open(dir, one_segment_options()).unwrap();
    for i in 0..n {
        let v = vec![b'a' + (i % 26) as u8; 1000];
        db.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    db.flush().unwrap();
    db.close().unwrap();
    let segs = vlog_files(dir);
    assert_eq!(segs.len(), 1, "{segs:?}");
    (model, segs[0].clone())
}

/// Flips a byte inside the value of the segment's last record (records of key(i) ‖ 1000 bytes).
fn damage_last_record(seg: &Path, records: u32) -> u64 {
    let mut bytes = std::fs::read(seg).unwrap();
    let record = (12 + key(0).len() + 1000) as u64;
    let last = 16 + record * u64::from(records - 1);
    bytes[(last + record - 10) as usize] ^= 0x5a;
    std::fs::write(seg, &bytes).unwrap();
    last
}

fn read_only() -> Options {
    Options {
        read_only: true,
        ..one_segment_options()
    }
}

#[test]
fn damaged_referenced_record_in_the_active_segment_fails_verify_and_writable_open_keeps_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (_, seg) = flushed_large_values(&dir, 10);
    let last = damage_last_record(&seg, 10);
    let damaged = std::fs::read(&seg).unwrap();
    {
        let db = DB::open(&dir, read_only()).unwrap();
        match db.verify() {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file, offset), (seg.clone(), last));
            }
            other => panic!("verify must name the damaged record: {other:?}"),
        }
    }
    match DB::open(&dir, one_segment_options()) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!((file, offset), (seg.clone(), last));
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a writable open must refuse damage a table points to"),
    }
    assert_eq!(
        std::fs::read(&seg).unwrap(),
        damaged,
        "the segment is kept as it was"
    );
    // Still refused the second time: nothing was sealed or cut.
    assert!(matches!(
        DB::open(&dir, one_segment_options()),
        Err(Error::Corruption { .. })
    ));
}

#[test]
fn damaged_first_record_of_the_active_segment_does_not_delete_the_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (_, seg) = flushed_large_values(&dir, 1);
    let first = damage_last_record(&seg, 1);
    assert_eq!(first, 16);
    assert!(matches!(
        DB::open(&dir, read_only()).unwrap().verify(),
        Err(Error::Corruption { offset: 16, .. })
    ));
    assert!(matches!(
        DB::open(&dir, one_segment_options()),
        Err(Error::Corruption { offset: 16, .. })
    ));
    assert!(seg.exists(), "the segment a table points into stays");
}

#[test]
fn damaged_last_record_of_a_sealed_segment_fails_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (_, seg) = flushed_large_values(&dir, 10);
    // A clean writable open seals the segment at its length.
    DB::open(&dir, one_segment_options())
        .unwrap()
        .close()
        .unwrap();
    let last = damage_last_record(&seg, 10);
    let db = DB::open(&dir, one_segment_options()).unwrap();
    assert!(db.stats().blob_files.iter().all(|b| b.sealed));
    match db.verify() {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!((file, offset), (seg.clone(), last));
        }
        other => panic!("verify must name the damaged record: {other:?}"),
    }
}

#[test]
fn damaged_tail_past_all_table_references_is_cut_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (model, seg) = flushed_large_values(&dir, 10);
    let tail_start = std::fs::metadata(&seg).unwrap().len();
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes.extend_from_slice(&[0x77; 300]); // a record that never finished
    std::fs::write(&seg, &bytes).unwrap();
    let db = DB::open(&dir, one_segment_options()).unwrap();
    check_all(&db, &model);
    db.verify().unwrap();
    let s = db.stats();
    let b = s.blob_files.iter().find(|b| b.size > 16).unwrap();
    assert!(
        b.sealed && b.size == tail_start,
        "sealed before the torn tail: {s:?}"
    );
}

#[test]
fn damaged_record_only_the_wal_names_is_a_torn_tail_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (mut model, _) = flushed_large_values(&dir, 10);
    {
        // The writable open seals the first segment; these go to a new one, named only by the
        // WAL (never flushed into a table).
        let db = DB::open(&dir, one_segment_options()).unwrap();
        for i in 10..12 {
            db.put(&key(i), &[b'w'; 1000]).unwrap();
        }
        db.close().unwrap();
    }
    // As a crash leaves it: no clean-close record (whose check would refuse the cut history).
    std::fs::remove_file(dir.join("CLOSED")).unwrap();
    model.insert(key(10), vec![b'w'; 1000]);
    let seg = vlog_files(&dir).pop().unwrap();
    damage_last_record(&seg, 2);
    let db = DB::open(&dir, one_segment_options()).unwrap();
    // Replay stops at the first pointer past the cut: a prefix of the history.
    check_all(&db, &model);
    db.verify().unwrap();
    assert!(seg.exists());
}
