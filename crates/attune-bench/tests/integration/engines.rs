//! Every engine installed on this machine behaves like a sorted map: a seeded random history of
//! puts, deletes, batches, gets and scans gives the same answers as a `BTreeMap` oracle, and the
//! data survives close and reopen. Halfway through, the engine compacts (`Engine::compact`) and
//! learns (`Engine::learn`) where it can, so answers after those steps are checked too. Engines
//! whose library is missing are reported and skipped.

use std::collections::BTreeMap;

use attune_bench::engine::{BatchOp, ENGINES};
use attune_bench::keys::{make_key, Rng};
use attune_bench::options::Settings;

fn check_engine(name: &str, seed: u64) {
    check_engine_with(name, seed, &[]);
}

fn check_engine_with(name: &str, seed: u64, extra: &[(&str, &str)]) {
    let kind = ENGINES.iter().find(|k| k.name == name).expect("registered");
    if let Err(e) = (kind.probe)() {
        eprintln!("skipping {name}: {e}");
        return;
    }
    println!("engine {name} seed {seed}");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let settings = Settings {
        cache_bytes: 1 << 20,
        write_buffer_bytes: 1 << 20,
        extra: extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Settings::default()
    };
    let mut oracle: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = Rng::new(seed);
    {
        let db = (kind.open)(&path, &settings).expect("open");
        let mut s = db.session().expect("session");
        let mut key = Vec::new();
        let mut got = Vec::new();
        for step in 0..3000u64 {
            if step == 1500 {
                let compacted = db.compact().expect("compact");
                let learned = db.learn().expect("learn");
                println!("{name}: compacted {compacted}, tables with a model {learned:?}");
            }
            make_key(rng.below(500), 16, &mut key);
            match rng.below(10) {
                0..=3 => {
                    let v = format!("v{step}").into_bytes();
                    s.put(&key, &v).expect("put");
                    oracle.insert(key.clone(), v);
                }
                4 => {
                    s.delete(&key).expect("delete");
                    oracle.remove(&key);
                }
                5 => {
                    let mut k2 = Vec::new();
                    make_key(rng.below(500), 16, &mut k2);
                    let v = format!("b{step}").into_bytes();
                    s.write_batch(&[BatchOp::Put(&key, &v), BatchOp::Delete(&k2)])
                        .expect("batch");
                    oracle.insert(key.clone(), v);
                    oracle.remove(&k2);
                }
                6..=8 => {
                    let found = s.get(&key, &mut got).expect("get");
                    assert_eq!(
                        found.then(|| got.clone()),
                        oracle.get(&key).cloned(),
                        "{name} step {step}"
                    );
                }
                _ => {
                    let n = rng.below(20) as usize;
                    let mut seen = Vec::new();
                    s.scan(&key, n, &mut |k, v| seen.push((k.to_vec(), v.to_vec())))
                        .expect("scan");
                    let want: Vec<_> = oracle
                        .range(key.clone()..)
                        .take(n)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    assert_eq!(seen, want, "{name} scan at step {step}");
                }
            }
        }
        drop(s);
        db.flush().expect("flush");
        db.close().expect("close");
    }
    let db = (kind.open)(&path, &settings).expect("reopen");
    let mut s = db.session().expect("session");
    let mut all = Vec::new();
    s.scan(&[], usize::MAX, &mut |k, v| {
        all.push((k.to_vec(), v.to_vec()))
    })
    .expect("scan all");
    let want: Vec<_> = oracle.into_iter().collect();
    assert_eq!(all, want, "{name} after reopen");
    drop(s);
    db.close().expect("close");
}

#[test]
fn rocksdb_matches_a_sorted_map_oracle() {
    check_engine("rocksdb", 11);
}

#[test]
fn leveldb_matches_a_sorted_map_oracle() {
    check_engine("leveldb", 12);
}

#[test]
fn wiredtiger_matches_a_sorted_map_oracle() {
    check_engine("wiredtiger", 13);
}

#[test]
fn lmdb_matches_a_sorted_map_oracle() {
    check_engine("lmdb", 14);
}

/// Skipped (with the reason) unless attune-bench is built with the `fjall` feature.
#[test]
fn fjall_matches_a_sorted_map_oracle() {
    check_engine("fjall", 16);
    check_engine_with("fjall", 17, &[("kv_separation", "on")]);
    let every_value = [("kv_separation", "on"), ("kv_separation_threshold", "1")];
    check_engine_with("fjall", 19, &every_value);
}

/// Bytes of the files under every `blobs` directory below `dir` (fjall's value logs).
fn blob_bytes(dir: &std::path::Path, inside: bool) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            n += blob_bytes(&p, inside || e.file_name() == "blobs");
        } else if inside {
            n += e.metadata().map_or(0, |m| m.len());
        }
    }
    n
}

/// `kv_separation_threshold` decides which values go to fjall's value log: 100-byte values
/// stay in the tree at the default 1 KiB threshold and move to blob files at 64 bytes. Its
/// keys without `kv_separation=on` are refused.
#[test]
fn fjall_kv_separation_threshold_moves_values_to_blob_files() {
    let kind = ENGINES
        .iter()
        .find(|k| k.name == "fjall")
        .expect("registered");
    if let Err(e) = (kind.probe)() {
        eprintln!("skipping fjall: {e}");
        return;
    }
    let run = |threshold: Option<&str>| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut extra: BTreeMap<String, String> = [("kv_separation", "on")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if let Some(t) = threshold {
            extra.insert("kv_separation_threshold".into(), t.into());
        }
        let settings = Settings {
            write_buffer_bytes: 1 << 20,
            extra,
            ..Settings::default()
        };
        let db = (kind.open)(&dir.path().join("db"), &settings).expect("open");
        let mut s = db.session().expect("session");
        let mut key = Vec::new();
        let value = vec![7u8; 100];
        for i in 0..40_000 {
            make_key(i, 16, &mut key);
            s.put(&key, &value).expect("put");
        }
        drop(s);
        db.close().expect("close");
        blob_bytes(dir.path(), false)
    };
    let default_threshold = run(None);
    let low_threshold = run(Some("64"));
    assert!(
        low_threshold > 1 << 20 && default_threshold < low_threshold / 4,
        "blob bytes: {default_threshold} at the default threshold, {low_threshold} at 64 B"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = Settings {
        extra: [("kv_separation_threshold".to_string(), "64".to_string())].into(),
        ..Settings::default()
    };
    let e = (kind.open)(&dir.path().join("db"), &settings)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("kv_separation=on"), "{e}");
}

#[test]
fn attune_matches_a_sorted_map_oracle() {
    check_engine("attune", 15);
}

#[test]
fn attune_with_models_always_on_matches_a_sorted_map_oracle() {
    check_engine_with("attune", 16, &[("learned_index", "always")]);
}

#[test]
fn attune_with_models_off_matches_a_sorted_map_oracle() {
    check_engine_with("attune", 17, &[("learned_index", "off")]);
}

/// A point-only history (puts, deletes, gets; a flush and a compaction halfway, then a
/// reopen) against a map oracle, for engine variants that do not scan in key order.
fn check_points_with(name: &str, seed: u64, extra: &[(&str, &str)]) {
    let kind = ENGINES.iter().find(|k| k.name == name).expect("registered");
    if let Err(e) = (kind.probe)() {
        eprintln!("skipping {name}: {e}");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let settings = Settings {
        cache_bytes: 1 << 20,
        write_buffer_bytes: 1 << 20,
        extra: extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Settings::default()
    };
    let mut oracle: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = Rng::new(seed);
    let mut key = Vec::new();
    let mut got = Vec::new();
    {
        let db = (kind.open)(&path, &settings).expect("open");
        let mut s = db.session().expect("session");
        for step in 0..3000u64 {
            if step == 1500 {
                db.flush().expect("flush");
                db.compact().expect("compact");
            }
            make_key(rng.below(500), 16, &mut key);
            match rng.below(10) {
                0..=4 => {
                    let v = format!("v{step}").into_bytes();
                    s.put(&key, &v).expect("put");
                    oracle.insert(key.clone(), v);
                }
                5 => {
                    s.delete(&key).expect("delete");
                    oracle.remove(&key);
                }
                _ => {
                    let found = s.get(&key, &mut got).expect("get");
                    let want = oracle.get(&key).cloned();
                    assert_eq!(found.then(|| got.clone()), want, "{name} step {step}");
                }
            }
        }
        drop(s);
        db.flush().expect("flush");
        db.close().expect("close");
    }
    let db = (kind.open)(&path, &settings).expect("reopen");
    let mut s = db.session().expect("session");
    for i in 0..500 {
        make_key(i, 16, &mut key);
        let found = s.get(&key, &mut got).expect("get");
        let want = oracle.get(&key).cloned();
        assert_eq!(
            found.then(|| got.clone()),
            want,
            "{name} key {i} after reopen"
        );
    }
    drop(s);
    db.close().expect("close");
}

/// RocksDB with PlainTable (mmap reads, a fixed-prefix extractor): points agree with the
/// oracle across a flush, a compaction and a reopen; a scan is refused, not answered wrongly.
#[test]
fn rocksdb_plain_table_matches_a_map_oracle_for_points() {
    check_points_with("rocksdb", 18, &[("table", "plain")]);
    let kind = ENGINES
        .iter()
        .find(|k| k.name == "rocksdb")
        .expect("registered");
    if (kind.probe)().is_err() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = Settings {
        extra: [("table".to_string(), "plain".to_string())].into(),
        ..Settings::default()
    };
    let db = (kind.open)(&dir.path().join("db"), &settings).expect("open");
    let mut s = db.session().expect("session");
    s.put(b"k0000001", b"v").expect("put");
    assert!(s.scan(b"k", 10, &mut |_, _| {}).is_err());
    drop(s);
    db.close().expect("close");
    let bad = Settings {
        extra: [("table".to_string(), "hash".to_string())].into(),
        ..Settings::default()
    };
    let e = (kind.open)(&dir.path().join("db2"), &bad)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("block or plain"), "{e}");
}
