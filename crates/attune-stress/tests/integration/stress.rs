//! Short stress runs for `make test`: simulated machine crashes (with torn writes and injected
//! faults) on the in-memory Env, and real SIGKILLs of child processes on the file system, each
//! recovery verified against the oracle. A failure prints the seed and the replay command.
//! `ATTUNE_STRESS_SECONDS=N` makes each run longer; `ATTUNE_STRESS_SEED=S` changes the seed.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_stress::{run_kill, run_mem, Config, Engine, Mode};
use std::path::PathBuf;
use std::time::Duration;

fn config(mode: Mode, seconds_default: u64) -> Config {
    let seconds = std::env::var("ATTUNE_STRESS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(seconds_default);
    let seed = std::env::var("ATTUNE_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261122);
    Config {
        mode,
        engine: Engine::Db,
        seed,
        threads: 3,
        duration: Duration::from_secs(seconds),
        cycles_max: 0,
        keys: 1000,
        dir: None,
        exe: Some(PathBuf::from(env!("CARGO_BIN_EXE_attune-stress"))),
    }
}

#[test]
fn machine_crashes_torn_writes_and_faults_lose_nothing_acknowledged() {
    let cfg = config(Mode::Mem, 20);
    match run_mem(&cfg) {
        Ok(r) => {
            eprintln!(
                "stress mem seed {}: {} cycles ({} crashes, {} torn), {} operations, {} faults, \
                 0 violations",
                r.seed,
                r.cycles,
                r.machine_crashes,
                r.torn_crashes,
                r.operations,
                r.faults_injected
            );
            assert!(r.cycles >= 10, "only {} cycles ran", r.cycles);
            assert!(r.machine_crashes > 0 && r.torn_crashes > 0, "{r:?}");
            assert!(r.keys_verified >= r.cycles * u64::from(cfg.keys));
            assert!(r.txn_commits > 0 && r.txn_conflicts > 0, "{r:?}");
        }
        Err(v) => panic!("{v}"),
    }
}

#[test]
fn sigkilled_children_lose_nothing_acknowledged() {
    let cfg = config(Mode::Kill, 15);
    match run_kill(&cfg) {
        Ok(r) => {
            eprintln!(
                "stress kill seed {}: {} SIGKILLs, {} writes acknowledged, 0 violations",
                r.seed, r.sigkills, r.writes_acked
            );
            assert!(r.sigkills >= 5, "only {} kills", r.sigkills);
            assert!(r.writes_acked > 0, "{r:?}");
        }
        Err(v) => panic!("{v}"),
    }
}

/// HashDB (the Plush hash table) under SIGKILL: a fixed number of cycles, each drawing sync on
/// or off, inline or background migration, the write or msync back end and (1 in 4) no
/// recovery log; every reopen is read back key by key and structure-checked.
/// `ATTUNE_STRESS_CYCLES=N` runs more.
#[test]
fn sigkilled_hash_db_children_lose_and_resurrect_nothing() {
    let cycles = std::env::var("ATTUNE_STRESS_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let cfg = Config {
        engine: Engine::Hash,
        cycles_max: cycles,
        duration: Duration::ZERO,
        ..config(Mode::Kill, 0)
    };
    match run_kill(&cfg) {
        Ok(r) => {
            eprintln!(
                "stress kill hash seed {}: {} SIGKILLs ({} during open), {} writes acknowledged, \
                 {} in flight found applied, {} cycles without the recovery log, 0 violations",
                r.seed,
                r.sigkills,
                r.sigkills_during_open,
                r.writes_acked,
                r.inflight_writes_recovered,
                r.unlogged_cycles
            );
            assert_eq!(r.sigkills, cycles, "{r:?}");
            assert!(r.writes_acked > 0, "{r:?}");
            assert_eq!(r.keys_verified, cycles * u64::from(cfg.keys));
            // The seed's first 12 cycles draw the log off 3 times.
            assert!(cycles < 12 || r.unlogged_cycles > 0, "{r:?}");
        }
        Err(v) => panic!("{v}"),
    }
}

#[test]
fn hash_db_in_mem_mode_is_refused() {
    let cfg = Config {
        engine: Engine::Hash,
        ..config(Mode::Mem, 1)
    };
    let v = run_mem(&cfg).unwrap_err();
    assert!(v.detail.contains("--mode kill"), "{v}");
}
