//! Merge operators: `merge` against a BTreeMap model that applies the same operator, across
//! flushes, compactions, reopens, snapshots, deletes, range deletes, expiring and separated
//! base values, in `get`, `multi_get` and both iterator directions; the operator's name is
//! recorded in the database; bad operands and a missing or different operator are refused.
//!
//! Replay a failure with `ATTUNE_SEED=<seed> cargo test --release -p attune-kv --test
//! integration merge::`.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::open_mem;
use attune_kv::env::MemEnv;
use attune_kv::{
    builtin_merge_operator, Error, MergeOperator, Options, ReadOptions, Snapshot, WriteBatch, DB,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const KEYS: u32 = 40;
const MIN_BLOB: usize = 100;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

fn options(op: &str) -> Options {
    Options {
        write_buffer_size: 16 << 10,
        target_file_size: 8 << 10,
        compression: attune_kv::Compression::None,
        min_blob_size: MIN_BLOB as u64,
        wal_sync_interval_ms: 0,
        merge_operator: Some(builtin_merge_operator(op).unwrap()),
        ..Options::default()
    }
}

/// What the model knows of a key: its base (value and expiry) and the operands since.
#[derive(Clone, Debug, Default)]
struct Entry {
    base: Option<(Vec<u8>, Option<u64>)>,
    operands: Vec<Vec<u8>>,
}

type Model = BTreeMap<Vec<u8>, Entry>;

/// The model's answer for every key at `now_ms`, with `op` applied.
fn view(m: &Model, op: &dyn MergeOperator, now_ms: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    for (k, e) in m {
        let base = e
            .base
            .as_ref()
            .filter(|(_, at)| at.is_none_or(|at| at > now_ms))
            .map(|(v, _)| v.as_slice());
        let v = if e.operands.is_empty() {
            base.map(<[u8]>::to_vec)
        } else {
            let ops: Vec<&[u8]> = e.operands.iter().map(Vec::as_slice).collect();
            Some(op.full_merge(k, base, &ops).unwrap())
        };
        if let Some(v) = v {
            out.insert(k.clone(), v);
        }
    }
    out
}

/// Every read path agrees with `want`.
fn check(db: &DB, ro: &ReadOptions, want: &BTreeMap<Vec<u8>, Vec<u8>>, ctx: &str) {
    let all: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
    let got = db.multi_get(&all, ro).unwrap();
    for (k, v) in all.iter().zip(&got) {
        assert_eq!(v.as_ref(), want.get(k), "{ctx}: multi_get {k:?}");
        assert_eq!(
            db.get_opt(k, ro).unwrap().as_ref(),
            want.get(k),
            "{ctx}: get {k:?}"
        );
    }
    let mut it = db.iter(ro).unwrap();
    it.seek_to_first();
    let mut fwd = BTreeMap::new();
    while it.valid() {
        fwd.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().unwrap();
    assert_eq!(&fwd, want, "{ctx}: forward scan");
    it.seek_to_last();
    let mut rev = Vec::new();
    while it.valid() {
        rev.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().unwrap();
    rev.reverse();
    let want_list: Vec<_> = want.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(rev, want_list, "{ctx}: reverse scan");
    // Changing direction on a merged entry: a seek, one step forward, one back.
    for probe in [5u32, 17, 33] {
        it.seek(&key(probe));
        let first = want.range(key(probe)..).next();
        assert_eq!(
            it.valid().then(|| (it.key().to_vec(), it.value().to_vec())),
            first.map(|(k, v)| (k.clone(), v.clone())),
            "{ctx}: seek {probe}"
        );
        if it.valid() {
            let here = it.key().to_vec();
            it.next();
            if it.valid() {
                it.prev();
                assert_eq!(it.key(), &here[..], "{ctx}: next then prev from {probe}");
                assert_eq!(
                    Some(it.value()),
                    want.get(&here).map(Vec::as_slice),
                    "{ctx}"
                );
            }
        }
    }
}

fn operand(rng: &mut StdRng, op: &str) -> Vec<u8> {
    match op {
        "add" => rng.gen_range(0u64..1000).to_le_bytes().to_vec(),
        _ => format!("{}", rng.gen_range(0..100)).into_bytes(),
    }
}

fn base_value(rng: &mut StdRng, op: &str, large: bool) -> Vec<u8> {
    match op {
        "add" if !large => rng.gen_range(0u64..1000).to_le_bytes().to_vec(),
        _ => {
            let mut v = format!("v{}", rng.gen_range(0..100)).into_bytes();
            if large {
                v.resize(MIN_BLOB + 50, b'.');
            }
            v
        }
    }
}

fn run_model(seed: u64, op_name: &str) {
    let op = builtin_merge_operator(op_name).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let env = MemEnv::new();
    let mut now = 1_000_000u64;
    env.set_unix_millis(now);
    let mut db = open_mem(&env, options(op_name)).unwrap();
    let mut model = Model::new();
    let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
    for step in 0..600 {
        let ctx = format!("seed {seed} {op_name} step {step}");
        let k = key(rng.gen_range(0..KEYS));
        match rng.gen_range(0..100) {
            0..=44 => {
                let o = operand(&mut rng, op_name);
                db.merge(&k, &o).unwrap();
                model.entry(k).or_default().operands.push(o);
            }
            45..=59 => {
                // `add` bases are 8-byte integers; a large base only for the other operators.
                let large = op_name != "add" && rng.gen_bool(0.4);
                let v = base_value(&mut rng, op_name, large);
                let ttl = rng.gen_bool(0.2).then(|| rng.gen_range(1..5u64));
                match ttl {
                    Some(s) => db
                        .put_ttl(&k, &v, Duration::from_secs(s), Default::default())
                        .unwrap(),
                    None => db.put(&k, &v).unwrap(),
                }
                let at = ttl.map(|s| now + s * 1000);
                model.insert(
                    k,
                    Entry {
                        base: Some((v, at)),
                        operands: Vec::new(),
                    },
                );
            }
            60..=66 => {
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            67..=69 => {
                let a = rng.gen_range(0..KEYS);
                let b = (a + rng.gen_range(1..6)).min(KEYS);
                db.delete_range(&key(a), &key(b)).unwrap();
                let gone: Vec<_> = model
                    .range(key(a)..key(b))
                    .map(|(k, _)| k.clone())
                    .collect();
                for g in gone {
                    model.remove(&g);
                }
            }
            70..=75 => {
                // A batch: a base and an operand of one key, atomically.
                let mut b = WriteBatch::new();
                let v = base_value(&mut rng, op_name, false);
                let o = operand(&mut rng, op_name);
                b.put(&k, &v).unwrap();
                b.merge(&k, &o).unwrap();
                db.write(b, Default::default()).unwrap();
                model.insert(
                    k,
                    Entry {
                        base: Some((v, None)),
                        operands: vec![o],
                    },
                );
            }
            76..=81 => db.flush().unwrap(),
            82..=85 => db.compact_range(None, None).unwrap(),
            86..=88 => {
                snaps.clear();
                db.close().unwrap();
                // The operator is recorded: the reopen does without the option.
                let mut opts = options(op_name);
                if rng.gen_bool(0.5) {
                    opts.merge_operator = None;
                }
                db = open_mem(&env, opts).unwrap();
            }
            89..=92 => {
                if snaps.len() >= 3 {
                    snaps.remove(0);
                }
                snaps.push((db.snapshot().unwrap(), model.clone()));
            }
            93..=95 => {
                now += rng.gen_range(500..3000);
                env.set_unix_millis(now);
            }
            _ => {}
        }
        if step % 25 == 24 {
            check(
                &db,
                &ReadOptions::default(),
                &view(&model, op.as_ref(), now),
                &ctx,
            );
            for (i, (s, m)) in snaps.iter().enumerate() {
                let ro = ReadOptions {
                    snapshot: Some(s.sequence()),
                    ..ReadOptions::default()
                };
                check(
                    &db,
                    &ro,
                    &view(m, op.as_ref(), now),
                    &format!("{ctx} snapshot {i}"),
                );
            }
        }
    }
    snaps.clear();
    db.compact_range(None, None).unwrap();
    check(
        &db,
        &ReadOptions::default(),
        &view(&model, op.as_ref(), now),
        "final",
    );
    // After a full compaction with no snapshot every key's operands are folded into one value,
    // except over a base that will still expire (the folded value could not follow it).
    for (k, e) in &model {
        let before = db.stats().merge_operands_read;
        db.get(k).unwrap();
        let read = db.stats().merge_operands_read - before;
        let expiring = e
            .base
            .as_ref()
            .is_some_and(|(_, at)| at.is_some_and(|at| at > now));
        if !expiring {
            assert_eq!(
                read, 0,
                "seed {seed}: operands of {k:?} left after compaction"
            );
        }
    }
}

fn seeds() -> Vec<u64> {
    match std::env::var("ATTUNE_SEED") {
        Ok(s) => vec![s.parse().unwrap()],
        Err(_) => vec![1, 2, 3],
    }
}

#[test]
fn merges_agree_with_the_model_for_append() {
    for seed in seeds() {
        run_model(seed, "append:,");
    }
}

#[test]
fn merges_agree_with_the_model_for_add() {
    for seed in seeds() {
        run_model(seed, "add");
    }
}

#[test]
fn merges_agree_with_the_model_for_max() {
    for seed in seeds() {
        run_model(seed + 100, "max");
    }
}

fn le(x: u64) -> Vec<u8> {
    x.to_le_bytes().to_vec()
}

#[test]
fn counters_count_across_flush_compaction_and_reopen() {
    let env = MemEnv::new();
    let db = open_mem(&env, options("add")).unwrap();
    for i in 0..100u64 {
        db.merge(b"c", &le(1)).unwrap();
        if i % 30 == 0 {
            db.flush().unwrap();
        }
    }
    assert_eq!(db.get(b"c").unwrap(), Some(le(100)));
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"c").unwrap(), Some(le(100)));
    db.merge(b"c", &le(u64::MAX)).unwrap(); // wraps: -1
    db.close().unwrap();
    let db = open_mem(&env, Options::default()).unwrap();
    assert_eq!(db.get(b"c").unwrap(), Some(le(99)));
    assert_eq!(db.options().merge_operator.as_ref().unwrap().name(), "add");
}

#[test]
fn a_snapshot_keeps_seeing_its_counter_after_compaction() {
    let env = MemEnv::new();
    let db = open_mem(&env, options("add")).unwrap();
    db.put(b"c", &le(10)).unwrap();
    db.merge(b"c", &le(1)).unwrap();
    let snap = db.snapshot().unwrap();
    db.merge(b"c", &le(5)).unwrap();
    db.compact_range(None, None).unwrap();
    let ro = ReadOptions {
        snapshot: Some(snap.sequence()),
        ..ReadOptions::default()
    };
    assert_eq!(db.get_opt(b"c", &ro).unwrap(), Some(le(11)));
    assert_eq!(db.get(b"c").unwrap(), Some(le(16)));
}

#[test]
fn bad_operands_and_missing_operators_are_refused() {
    let env = MemEnv::new();
    let db = open_mem(&env, options("add")).unwrap();
    let e = db.merge(b"c", b"short").unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("operand")),
        "{e}"
    );
    // A base that is not 8 bytes fails the read, naming the key.
    db.put(b"c", b"xy").unwrap();
    db.merge(b"c", &le(1)).unwrap();
    let e = db.get(b"c").unwrap_err();
    assert!(e.to_string().contains("\"c\""), "{e}");
    db.close().unwrap();
    // Another operator than the recorded one.
    let e = open_mem(&env, options("append")).err().unwrap();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("merge_operator")),
        "{e}"
    );

    let env = MemEnv::new();
    let db = open_mem(&env, Options::default()).unwrap();
    let e = db.merge(b"c", b"x").unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("merge_operator")),
        "{e}"
    );
    let mut o = Options::default();
    let e = o.set("merge_operator", "sum").unwrap_err();
    assert!(e.to_string().contains("merge_operator"), "{e}");
}

/// A user operator: keeps the last operand's length history.
struct Lengths;

impl MergeOperator for Lengths {
    fn name(&self) -> &str {
        "lengths"
    }
    fn full_merge(
        &self,
        _key: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> attune_kv::Result<Vec<u8>> {
        let mut out = base.map(<[u8]>::to_vec).unwrap_or_default();
        out.extend(operands.iter().map(|o| o.len() as u8));
        Ok(out)
    }
}

#[test]
fn a_user_operator_is_recorded_by_name_and_required_at_reopen() {
    let env = MemEnv::new();
    let opts = || Options {
        merge_operator: Some(Arc::new(Lengths) as Arc<dyn MergeOperator>),
        ..Options::default()
    };
    let db = open_mem(&env, opts()).unwrap();
    db.merge(b"k", b"abc").unwrap();
    db.merge(b"k", b"a").unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(vec![3, 1]));
    db.close().unwrap();
    let e = open_mem(&env, Options::default()).err().unwrap();
    assert!(e.to_string().contains("lengths"), "{e}");
    let db = open_mem(&env, opts()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(vec![3, 1]));
}

#[test]
fn collection_moves_a_separated_base_with_its_operands() {
    let env = MemEnv::new();
    let mut opts = options("append:,");
    opts.blob_file_size = 4 << 10;
    let db = open_mem(&env, opts).unwrap();
    let big = vec![b'x'; MIN_BLOB + 10];
    for i in 0..40u32 {
        db.put(&key(i), &big).unwrap();
    }
    db.merge(&key(3), b"tail").unwrap();
    // Overwrite the others so that their segments are mostly garbage.
    for i in 0..40u32 {
        if i != 3 {
            db.put(&key(i), b"small").unwrap();
        }
    }
    db.flush().unwrap();
    db.gc_with_ratio(0.0).unwrap();
    let mut want = big.clone();
    want.extend_from_slice(b",tail");
    assert_eq!(db.get(&key(3)).unwrap(), Some(want.clone()));
    db.compact_range(None, None).unwrap();
    db.gc_with_ratio(0.0).unwrap();
    assert_eq!(db.get(&key(3)).unwrap(), Some(want));
}

#[test]
fn a_transaction_reads_its_own_merges_and_conflicts_like_a_put() {
    let env = MemEnv::new();
    let db = open_mem(&env, options("add")).unwrap();
    db.put(b"c", &le(10)).unwrap();
    let mut t = db.transaction().unwrap();
    t.merge(b"c", &le(1)).unwrap();
    t.merge(b"c", &le(2)).unwrap();
    assert_eq!(t.get(b"c").unwrap(), Some(le(13)));
    t.delete(b"d").unwrap();
    t.merge(b"d", &le(4)).unwrap();
    assert_eq!(t.get(b"d").unwrap(), Some(le(4)));
    assert!(t.merge(b"c", b"bad").is_err());
    t.commit(Default::default()).unwrap();
    assert_eq!(db.get(b"c").unwrap(), Some(le(13)));
    assert_eq!(db.get(b"d").unwrap(), Some(le(4)));
    // Another write to a merged key after the snapshot is a conflict.
    let mut t = db.transaction().unwrap();
    t.merge(b"c", &le(1)).unwrap();
    db.merge(b"c", &le(100)).unwrap();
    let e = t.commit(Default::default()).unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
    assert_eq!(db.get(b"c").unwrap(), Some(le(113)));
}
