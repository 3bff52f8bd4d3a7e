//! Crash test: a child process writes a deterministic history and records each acknowledged
//! operation; the parent kills it with SIGKILL at random moments, reopens the database and checks
//! that it holds exactly a prefix of the history that includes every acknowledged operation (no
//! holes, no resurrected deletes or range deletes, atomic batches). Small buffers keep flushes and compactions
//! running when the kill lands; a third of the values go to the value log, whose small segments
//! switch often and are garbage-collected in the background and on demand while the kills land.
//!
//! The same test runs a second time with compaction's and collection's I/O through Data Pipes
//! (`pipes_bulk_io`).
//!
//! `ATTUNE_CRASH_CYCLES=N` runs more cycles; `ATTUNE_SEED=S` replays one history.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_kv::{Options, ReadOptions, WriteBatch, WriteOptions, DB};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const CHILD_ENV: &str = "ATTUNE_CRASH_CHILD_DIR";
/// Set (to "1") for a child that runs with `pipes_bulk_io` on.
const PIPES_ENV: &str = "ATTUNE_CRASH_PIPES";

enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// `delete_range(begin, end)`.
    DeleteRange(Vec<u8>, Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
}

fn op(seed: u64, i: u64) -> (Op, bool) {
    let mut rng = StdRng::seed_from_u64(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let key = |rng: &mut StdRng| format!("key{:04}", rng.gen_range(0..400)).into_bytes();
    let value = |rng: &mut StdRng| {
        let mut v = format!("op{i}:").into_bytes();
        // A third of the values are large enough for the value log.
        let extra = if rng.gen_bool(0.33) {
            rng.gen_range(600..3000)
        } else {
            rng.gen_range(0..300)
        };
        v.resize(v.len() + extra, b'x');
        v
    };
    let sync = i.is_multiple_of(3);
    let o = match rng.gen_range(0..100) {
        0..=69 => Op::Put(key(&mut rng), value(&mut rng)),
        70..=81 => Op::Delete(key(&mut rng)),
        82..=84 => {
            let a = rng.gen_range(0..400);
            let b = (a + rng.gen_range(1..40)).min(400);
            Op::DeleteRange(
                format!("key{a:04}").into_bytes(),
                format!("key{b:04}").into_bytes(),
            )
        }
        _ => Op::Batch(
            (0..rng.gen_range(2..6))
                .map(|_| {
                    let k = key(&mut rng);
                    (k, rng.gen_bool(0.7).then(|| value(&mut rng)))
                })
                .collect(),
        ),
    };
    (o, sync)
}

fn apply(m: &mut BTreeMap<Vec<u8>, Vec<u8>>, o: &Op) {
    match o {
        Op::Put(k, v) => {
            m.insert(k.clone(), v.clone());
        }
        Op::Delete(k) => {
            m.remove(k);
        }
        Op::DeleteRange(a, b) => {
            m.retain(|k, _| k < a || k >= b);
        }
        Op::Batch(items) => {
            for (k, v) in items {
                match v {
                    Some(v) => m.insert(k.clone(), v.clone()),
                    None => m.remove(k),
                };
            }
        }
    }
}

fn options(pipes: bool) -> Options {
    Options {
        pipes_bulk_io: pipes,
        write_buffer_size: 64 << 10,
        target_file_size: 64 << 10,
        max_bytes_for_level_base: 256 << 10,
        l0_compaction_trigger: 2,
        // Small value-log segments and eager collection: kills land in segment switches and
        // in garbage collection too.
        min_blob_size: 512,
        blob_file_size: 64 << 10,
        blob_gc_space_amp: 1.2,
        blob_gc_garbage_ratio: 0.2,
        ..Options::default()
    }
}

/// Runs in the child: write ops from `start` until killed.
fn child_main(dir: &Path, seed: u64, start: u64, pipes: bool) {
    let db = DB::open(dir, options(pipes)).expect("child open");
    let mut acks = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("ACKS.txt"))
        .expect("acks");
    for i in start.. {
        let (o, sync) = op(seed, i);
        let wo = WriteOptions { sync };
        match o {
            Op::Put(k, v) => db.put_opt(&k, &v, wo),
            Op::Delete(k) => db.delete_opt(&k, wo),
            Op::DeleteRange(a, b) => db.delete_range_opt(&a, &b, wo),
            Op::Batch(items) => {
                let mut b = WriteBatch::new();
                for (k, v) in items {
                    match v {
                        Some(v) => b.put(&k, &v).expect("batch put"),
                        None => b.delete(&k).expect("batch delete"),
                    }
                }
                db.write(b, wo)
            }
        }
        .expect("child write");
        // An unbuffered write(2): survives SIGKILL of this process.
        acks.write_all(format!("{i}\n").as_bytes()).expect("ack");
        if i % 40 == 39 {
            db.gc_with_ratio(0.1).expect("child gc");
        }
    }
}

#[test]
fn child_process_entry_point() {
    // Only does something when the crash test below starts this binary as its child.
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        let seed = std::env::var("ATTUNE_CRASH_SEED").unwrap().parse().unwrap();
        let start = std::env::var("ATTUNE_CRASH_START")
            .unwrap()
            .parse()
            .unwrap();
        let pipes = std::env::var(PIPES_ENV).is_ok_and(|v| v == "1");
        child_main(Path::new(&dir), seed, start, pipes);
    }
}

fn read_db(dir: &Path, pipes: bool) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = DB::open(dir, options(pipes)).unwrap_or_else(|e| panic!("reopen after kill: {e}"));
    let mut it = db.iter(&ReadOptions::default()).expect("open an iterator");
    it.seek_to_first();
    let mut m = BTreeMap::new();
    while it.valid() {
        m.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().expect("scan after recovery");
    drop(it);
    db.close().expect("close");
    m
}

fn last_ack(dir: &Path) -> Option<u64> {
    let s = std::fs::read_to_string(dir.join("ACKS.txt")).ok()?;
    // Only complete lines count (the kill may land inside the ack write).
    s.split_inclusive('\n')
        .rfind(|l| l.ends_with('\n'))?
        .trim()
        .parse()
        .ok()
}

#[test]
fn sigkill_at_random_points_keeps_a_prefix_with_every_acknowledged_write() {
    crash_cycles(false, 12);
}

#[test]
fn sigkill_with_compaction_and_collection_through_pipes_keeps_a_prefix() {
    crash_cycles(true, 8);
}

fn crash_cycles(pipes: bool, default_cycles: u32) {
    let seed: u64 = std::env::var("ATTUNE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(42);
    let cycles: u32 = std::env::var("ATTUNE_CRASH_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_cycles);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    let mut applied: u64 = 0; // ops 0..applied are in the model
    let exe = std::env::current_exe().unwrap();
    for cycle in 0..cycles {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "child_process_entry_point",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &dir)
            .env(PIPES_ENV, if pipes { "1" } else { "0" })
            .env("ATTUNE_CRASH_SEED", seed.to_string())
            .env("ATTUNE_CRASH_START", applied.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.gen_range(50..400)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let acked_through = last_ack(&dir);
        // Every op up to the last acknowledged one must be present.
        let must = acked_through.map_or(applied, |a| (a + 1).max(applied));
        while applied < must {
            apply(&mut model, &op(seed, applied).0);
            applied += 1;
        }
        let got = read_db(&dir, pipes);
        if got != model {
            // The one op in flight at the kill may have landed too (atomically).
            let mut next = model.clone();
            apply(&mut next, &op(seed, applied).0);
            assert!(
                got == next,
                "seed {seed} cycle {cycle}: recovered state is not a prefix of the history \
                 (acknowledged through {acked_through:?}, {} keys recovered, {} expected)",
                got.len(),
                model.len()
            );
            model = next;
            applied += 1;
        }
    }
    assert!(
        applied > 0,
        "seed {seed}: the child never acknowledged a write"
    );
    eprintln!(
        "crash test (seed {seed}, pipes {pipes}): {cycles} SIGKILL cycles, {applied} operations verified as a \
         prefix with every acknowledged write"
    );
}
