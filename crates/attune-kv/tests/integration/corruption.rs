//! Corruption tests: flip bytes in every kind of file and check that the engine reports a
//! corruption error naming the file (and offset), never panics, and never returns wrong data.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_kv::{Error, Options, ReadOptions, DB};
use std::collections::BTreeMap;
use std::path::Path;

fn options() -> Options {
    Options {
        write_buffer_size: 32 << 10,
        wal_sync_interval_ms: 0,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-{}", "v".repeat((i % 50) as usize)).into_bytes()
}

/// Builds a database with tables in several levels plus unflushed WAL records.
fn build(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = DB::open(dir, options()).unwrap();
    let mut m = BTreeMap::new();
    for i in 0..3000 {
        db.put(&key(i), &value(i)).unwrap();
        m.insert(key(i), value(i));
    }
    db.compact_range(None, None).unwrap();
    for i in 0..200 {
        db.put(&key(i * 7), &value(i + 10_000)).unwrap();
        m.insert(key(i * 7), value(i + 10_000));
    }
    db.close().unwrap();
    m
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn acceptable(e: &Error, file: &str) -> bool {
    let msg = e.to_string();
    matches!(
        e,
        Error::Corruption { .. } | Error::UnsupportedVersion { .. } | Error::NotADatabase { .. }
    ) && (msg.contains(file) || msg.contains("CURRENT") || msg.contains("MANIFEST"))
}

/// Opens a damaged copy and checks every answer: right data or a corruption error.
fn check_damaged(
    dir: &Path,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    file: &str,
    offset: u64,
) -> &'static str {
    let db = match DB::open(dir, options()) {
        Ok(db) => db,
        Err(e) => {
            assert!(
                acceptable(&e, file),
                "flip in {file} at {offset}: unexpected open error {e}"
            );
            return "open refused";
        }
    };
    let mut errors = 0;
    for (k, v) in model {
        match db.get(k) {
            Ok(Some(got)) => assert_eq!(&got, v, "flip in {file} at {offset}: wrong value"),
            Ok(None) => panic!(
                "flip in {file} at {offset}: key {:?} vanished without an error",
                String::from_utf8_lossy(k)
            ),
            Err(e) => {
                assert!(
                    acceptable(&e, file),
                    "flip in {file} at {offset}: unexpected get error {e}"
                );
                errors += 1;
            }
        }
    }
    let mut it = db.iter(&ReadOptions::default()).expect("open an iterator");
    it.seek_to_first();
    let mut expect = model.iter();
    while it.valid() {
        let (k, v) = expect.next().expect("scan returned an extra key");
        assert_eq!(
            (it.key(), it.value()),
            (k.as_slice(), v.as_slice()),
            "flip in {file} at {offset}: scan"
        );
        it.next();
    }
    if let Err(e) = it.status() {
        assert!(
            acceptable(&e, file),
            "flip in {file} at {offset}: unexpected scan error {e}"
        );
        errors += 1;
    } else {
        assert!(
            expect.next().is_none(),
            "flip in {file} at {offset}: scan ended early without error"
        );
    }
    if errors > 0 {
        "reads refused"
    } else {
        "harmless"
    }
}

fn flip(path: &Path, offset: u64) {
    let mut data = std::fs::read(path).unwrap();
    data[offset as usize] ^= 0x5a;
    std::fs::write(path, data).unwrap();
}

#[test]
fn flipped_bytes_in_any_file_are_detected_or_harmless() {
    let tmp = tempfile::tempdir().unwrap();
    let pristine = tmp.path().join("pristine");
    let model = build(&pristine);
    let mut names: Vec<String> = std::fs::read_dir(&pristine)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "LOCK")
        .collect();
    names.sort();
    let mut kinds_checked = std::collections::BTreeSet::new();
    let mut detected = 0;
    for name in &names {
        let len = std::fs::metadata(pristine.join(name)).unwrap().len();
        let mut offsets: Vec<u64> = (0..12).map(|i| i * len / 12).collect();
        offsets.push(len - 1);
        // The log's final record too: after a clean close the clean-close record says how far
        // the log goes, so a damaged last record is not taken for a torn write.
        offsets.dedup();
        for off in offsets {
            let case = tmp.path().join(format!("case-{name}-{off}"));
            copy_dir(&pristine, &case);
            flip(&case.join(name), off);
            let outcome = check_damaged(&case, &model, name, off);
            if outcome != "harmless" {
                detected += 1;
            }
            std::fs::remove_dir_all(&case).unwrap();
        }
        kinds_checked.insert(
            name.rsplit('.')
                .next()
                .unwrap()
                .split('-')
                .next()
                .unwrap()
                .to_string(),
        );
    }
    for kind in ["sst", "log", "MANIFEST", "CURRENT", "CLOSED"] {
        assert!(
            kinds_checked.contains(kind),
            "no {kind} file was damaged: {names:?}"
        );
    }
    assert!(detected > 0);
}

#[test]
fn sst_data_block_damage_names_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let model = build(&dir);
    let sst = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    flip(&sst, 10); // inside the first data block
    let db = DB::open(&dir, options()).unwrap();
    let mut saw = false;
    for k in model.keys() {
        if let Err(e) = db.get(k) {
            let Error::Corruption { file, offset, .. } = &e else {
                panic!("unexpected error {e}")
            };
            assert_eq!(file, &sst);
            assert_eq!(*offset, 0, "the first data block starts at offset 0");
            saw = true;
            break;
        }
    }
    assert!(saw, "no read reported the damaged block");
}

#[test]
fn opening_a_foreign_directory_or_a_locked_database_is_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("notes.txt"), b"hello").unwrap();
    let e = DB::open(tmp.path(), options()).err().expect("must refuse");
    assert!(matches!(e, Error::NotADatabase { .. }), "{e}");
    assert!(e.to_string().contains("notes.txt"), "{e}");

    let dir = tmp.path().join("db");
    let db = DB::open(&dir, options()).unwrap();
    let e = DB::open(&dir, options())
        .err()
        .expect("second opener must be refused");
    assert!(matches!(e, Error::Locked { .. }), "{e}");
    drop(db);
    DB::open(&dir, options()).unwrap();

    let missing = tmp.path().join("missing");
    let e = DB::open(
        &missing,
        Options {
            create_if_missing: false,
            ..options()
        },
    )
    .err()
    .unwrap();
    assert!(matches!(e, Error::NotADatabase { .. }), "{e}");
}

#[test]
fn newer_format_version_is_refused() {
    use attune_kv::env::{Env, PosixEnv};
    use attune_kv::internals::LogWriter;
    use attune_kv::internals::VersionEdit;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    drop(DB::open(&dir, options()).unwrap());
    let env = PosixEnv::new();
    let mut w = LogWriter::new(env.new_writable(&dir.join("MANIFEST-000099")).unwrap());
    let e = VersionEdit {
        format_version: Some(99),
        log_number: Some(1),
        next_file_number: Some(100),
        last_sequence: Some(0),
        ..Default::default()
    };
    w.add_record(&e.encode()).unwrap();
    w.sync().unwrap();
    std::fs::write(dir.join("CURRENT"), "MANIFEST-000099\n").unwrap();
    let err = DB::open(&dir, options()).err().expect("must refuse");
    assert!(
        matches!(err, Error::UnsupportedVersion { found: 99, .. }),
        "{err}"
    );
}

/// The manifest's last record is a flush's (tables added, the flushed log retired and deleted).
/// Damaging or cutting that record must not let the open treat it as a torn write: the log it
/// retired is gone, so dropping it would hide the flushed writes and delete their table. The
/// open fails naming the manifest, leaves every file in place, and repair recovers everything.
#[test]
fn damaged_last_manifest_record_after_a_flush_is_refused_and_repairable() {
    let tmp = tempfile::tempdir().unwrap();
    let pristine = tmp.path().join("pristine");
    let mut model = BTreeMap::new();
    {
        let db = DB::open(&pristine, options()).unwrap();
        for i in 0..300 {
            db.put(&key(i), &value(i)).unwrap();
            model.insert(key(i), value(i));
        }
        db.flush().unwrap();
        for i in 300..330 {
            db.put(&key(i), &value(i)).unwrap();
            model.insert(key(i), value(i));
        }
        db.close().unwrap();
    }
    let manifest = std::fs::read_dir(&pristine)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.starts_with("MANIFEST-"))
        .unwrap();
    let data = std::fs::read(pristine.join(&manifest)).unwrap();
    // Record boundaries: a 9-byte header (crc 4, length 4, type 1), then the payload.
    let mut starts = vec![0usize];
    while let Some(&at) = starts.last() {
        let len = u32::from_le_bytes(data[at + 4..at + 8].try_into().unwrap()) as usize;
        if at + 9 + len >= data.len() {
            break;
        }
        starts.push(at + 9 + len);
    }
    let last = *starts.last().unwrap();
    let files = |dir: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".sst") || n.ends_with(".log"))
            .collect();
        v.sort();
        v
    };
    let before = files(&pristine);
    // Every byte of the last record flipped, then the file cut by 1 and by 20 bytes.
    let mut damage: Vec<(u64, bool)> = (last..data.len()).map(|o| (o as u64, true)).collect();
    damage.extend([1u64, 20].map(|cut| (data.len() as u64 - cut, false)));
    for (i, &(at, is_flip)) in damage.iter().enumerate() {
        let case = tmp.path().join(format!("case-{i}"));
        copy_dir(&pristine, &case);
        let m = case.join(&manifest);
        if is_flip {
            flip(&m, at);
        } else {
            let f = std::fs::OpenOptions::new().write(true).open(&m).unwrap();
            f.set_len(at).unwrap();
        }
        let outcome = check_damaged(&case, &model, &manifest, i as u64);
        assert_eq!(outcome, "open refused", "damage case {i}");
        assert_eq!(
            files(&case),
            before,
            "damage case {i}: the open changed the files"
        );
        attune_kv::repair(&case, options()).unwrap();
        let db = DB::open(&case, options()).unwrap();
        for (k, v) in &model {
            assert_eq!(
                db.get(k).unwrap().as_ref(),
                Some(v),
                "damage case {i}, after repair"
            );
        }
        db.close().unwrap();
        std::fs::remove_dir_all(&case).unwrap();
    }
}

/// After a clean close the newest writes live only in the WAL (close does not flush, as in
/// RocksDB). A log cut short, emptied or removed afterwards must fail the open (writable and
/// read-only) naming the log, change nothing, and leave repair able to keep the rest; a crash
/// leaves no clean-close record, so its torn tail still opens (the fault-plan tests).
#[test]
fn a_log_damaged_after_a_clean_close_is_refused_not_taken_for_a_torn_write() {
    let tmp = tempfile::tempdir().unwrap();
    let pristine = tmp.path().join("pristine");
    let model = build(&pristine);
    let logs: Vec<String> = {
        let mut v: Vec<String> = std::fs::read_dir(&pristine)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".log"))
            .collect();
        v.sort();
        v
    };
    let log = logs.last().unwrap().clone();
    let len = std::fs::metadata(pristine.join(&log)).unwrap().len();
    let listing = |dir: &Path| {
        let mut v: Vec<(String, u64)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name() != "LOCK")
            .map(|e| {
                let n = e.file_name().into_string().unwrap();
                (n, e.metadata().unwrap().len())
            })
            .collect();
        v.sort();
        v
    };
    for (i, cut) in [Some(1u64), Some(len / 3), Some(len), None]
        .iter()
        .enumerate()
    {
        let case = tmp.path().join(format!("case-{i}"));
        copy_dir(&pristine, &case);
        match cut {
            Some(c) => std::fs::OpenOptions::new()
                .write(true)
                .open(case.join(&log))
                .unwrap()
                .set_len(len - c)
                .unwrap(),
            None => std::fs::remove_file(case.join(&log)).unwrap(),
        }
        let before = listing(&case);
        for read_only in [false, true] {
            let o = Options {
                read_only,
                ..options()
            };
            let e = DB::open(&case, o)
                .err()
                .expect("the damaged log was accepted");
            let msg = e.to_string();
            assert!(
                matches!(e, Error::Corruption { .. })
                    && msg.contains(&log)
                    && msg.contains("closed cleanly")
                    && msg.contains("repair"),
                "case {i}: {msg}"
            );
        }
        assert_eq!(
            listing(&case),
            before,
            "case {i}: the refused open changed files"
        );
        attune_kv::repair(&case, options()).unwrap();
        let db = DB::open(&case, options()).unwrap();
        // Each key reads its newest value, or the one its overwrite in the lost log replaced.
        for (n, (k, v)) in (0u32..).zip(&model) {
            let got = db.get(k).unwrap().unwrap();
            assert!(
                &got == v || got == value(n),
                "case {i}: wrong value after repair"
            );
        }
        db.close().unwrap();
        std::fs::remove_dir_all(&case).unwrap();
    }
    // A stale record (here one put back after later writes) never fails an open: sequence
    // numbers only grow.
    let stale = std::fs::read(pristine.join("CLOSED")).unwrap();
    {
        let db = DB::open(&pristine, options()).unwrap();
        assert!(
            !pristine.join("CLOSED").exists(),
            "the open kept the record"
        );
        db.put(b"later", b"write").unwrap();
        db.close().unwrap();
    }
    std::fs::write(pristine.join("CLOSED"), stale).unwrap();
    let db = DB::open(&pristine, options()).unwrap();
    assert_eq!(db.get(b"later").unwrap().as_deref(), Some(&b"write"[..]));
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
}
