//! `Options::compaction_filter`: compaction asks the filter about the newest version of each key
//! no snapshot needs as it is, inline or separated, and removes or rewrites it as told, without
//! ever reviving an older version.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::open_mem;
use attune_kv::env::MemEnv;
use attune_kv::{CompactionFilter, FilterDecision, Options, ReadOptions, DB};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Removes keys starting with "tmp:", upper-cases values starting with "shout:", keeps the rest.
#[derive(Default)]
struct Rules {
    calls: AtomicU64,
}

impl CompactionFilter for Rules {
    fn name(&self) -> &str {
        "rules"
    }
    fn filter(&self, _level: usize, key: &[u8], value: &[u8]) -> FilterDecision {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if key.starts_with(b"tmp:") {
            FilterDecision::Remove
        } else if value.starts_with(b"shout:") {
            FilterDecision::Change(value.to_ascii_uppercase())
        } else {
            FilterDecision::Keep
        }
    }
}

fn open(env: &MemEnv, rules: &Arc<Rules>) -> DB {
    let opts = Options {
        write_buffer_size: 64 << 10,
        min_blob_size: 100,
        blob_gc_space_amp: 0.0,
        compaction_filter: Some(rules.clone() as Arc<dyn CompactionFilter>),
        ..Options::default()
    };
    open_mem(env, opts).unwrap()
}

fn long(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.resize(300, b'.'); // separated
    v
}

#[test]
fn compaction_removes_and_rewrites_as_the_filter_says() {
    let env = MemEnv::new();
    let rules = Arc::new(Rules::default());
    let db = open(&env, &rules);
    db.put(b"tmp:old", b"base").unwrap();
    db.compact_range(None, None).unwrap(); // an older version at the bottom...
    let removed_before = db.get(b"tmp:old").unwrap();
    assert_eq!(
        removed_before, None,
        "the bottom compaction already filtered it"
    );
    db.put(b"keep", b"plain").unwrap();
    db.put(b"tmp:a", b"x").unwrap();
    db.put(b"tmp:b", &long("x")).unwrap();
    db.put(b"loud", b"shout: hi").unwrap();
    db.put(b"loud-big", &long("shout: big")).unwrap();
    // Until a compaction reaches them, they read as written.
    assert_eq!(db.get(b"tmp:a").unwrap().unwrap(), b"x");
    db.compact_range(None, None).unwrap();
    assert!(rules.calls.load(Ordering::Relaxed) >= 5);
    assert_eq!(db.get(b"tmp:a").unwrap(), None);
    assert_eq!(db.get(b"tmp:b").unwrap(), None);
    assert_eq!(db.get(b"keep").unwrap().unwrap(), b"plain");
    assert_eq!(db.get(b"loud").unwrap().unwrap(), b"SHOUT: HI");
    assert_eq!(
        db.get(b"loud-big").unwrap().unwrap(),
        long("shout: big").to_ascii_uppercase()
    );
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut keys = Vec::new();
    while it.valid() {
        keys.push(it.key().to_vec());
        it.next();
    }
    assert_eq!(
        keys,
        vec![b"keep".to_vec(), b"loud".to_vec(), b"loud-big".to_vec()]
    );
    // The separated value of tmp:b is garbage now.
    assert!(db.stats().blob_garbage_bytes >= 300);
}

#[test]
fn a_removed_key_never_revives_an_older_version_and_snapshots_keep_their_view() {
    let env = MemEnv::new();
    let rules = Arc::new(Rules::default());
    let db = open(&env, &rules);
    // An older version written before the filter could see the key: make it unfilterable by
    // holding a snapshot over it, then push a newer version through compactions.
    db.put(b"tmp:k", b"v1").unwrap();
    let snap = db.snapshot().unwrap();
    db.compact_range(None, None).unwrap();
    let ro = ReadOptions {
        snapshot: Some(snap.sequence()),
        ..ReadOptions::default()
    };
    assert_eq!(
        db.get_opt(b"tmp:k", &ro).unwrap().unwrap(),
        b"v1",
        "a snapshot needs it"
    );
    drop(snap);
    db.put(b"tmp:k", b"v2").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"tmp:k").unwrap(), None);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"tmp:k").unwrap(), None);
}
