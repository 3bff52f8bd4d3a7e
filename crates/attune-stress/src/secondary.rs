//! A secondary instance beside the stress writer: in the cycles that draw it, a reader thread
//! opens the database as a secondary (`Options::secondary`), catches up with the workers again
//! and again, and checks after every catch-up that what it reads is something the workers wrote:
//! every key in order, every value exactly the one an issued operation wrote to that key
//! ([`value_op`]), from an operation issued before the catch-up ended. A crash or an injected
//! fault makes its errors expected, as the workers' are.
//!
//! Thread safety: runs in its own thread beside the workers; shares the op counter and flags.

use crate::stress::{parse_key, value_op};
use attune_kv::env::{Env, MemEnv};
use attune_kv::{Options, ReadOptions, DB};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the reader did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Followed {
    pub catch_ups: u64,
    pub keys_checked: u64,
}

/// Follows the writer of `dir` until `stop`; `Err` names a violation.
pub(crate) fn follow(
    env: &MemEnv,
    dir: &Path,
    opts: &Options,
    next_op: &AtomicU64,
    errors_expected: &AtomicBool,
    stop: &AtomicBool,
) -> Result<Followed, String> {
    let mut out = Followed::default();
    let opts = Options {
        secondary: true,
        ..opts.clone()
    };
    let expected = |what: &str, e: attune_kv::Error| -> Result<(), String> {
        if errors_expected.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(format!(
                "secondary: {what} failed without a crash or fault: {e}"
            ))
        }
    };
    let db = match DB::open_with_env(Arc::new(env.clone()) as Arc<dyn Env>, dir, opts) {
        Ok(db) => db,
        Err(e) => return expected("open", e).map(|_| out),
    };
    let mut last_seq = 0;
    while !stop.load(Ordering::SeqCst) {
        let c = match db.try_catch_up() {
            Ok(c) => c,
            Err(e) => {
                expected("try_catch_up", e)?;
                break;
            }
        };
        if c.sequence_after < c.sequence_before || c.sequence_before < last_seq {
            return Err(format!(
                "secondary: the sequence went back: {c:?} after {last_seq}"
            ));
        }
        last_seq = c.sequence_after;
        out.catch_ups += 1;
        // Every operation that wrote what the secondary now reads was issued before this.
        let issued = next_op.load(Ordering::SeqCst);
        if let Err(e) = check_scan(&db, issued, &mut out.keys_checked) {
            match e {
                Check::Engine(e) => {
                    expected("a scan", e)?;
                    break;
                }
                Check::Violation(v) => return Err(v),
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = db.close();
    Ok(out)
}

enum Check {
    Engine(attune_kv::Error),
    Violation(String),
}

fn check_scan(db: &DB, issued: u64, checked: &mut u64) -> Result<(), Check> {
    let mut it = db.iter(&ReadOptions::default()).map_err(Check::Engine)?;
    // The merge counters come after the keys (the workers check them).
    it.set_bounds(None, Some(crate::counters::COUNTERS_START.to_vec()));
    it.seek_to_first();
    let mut prev: Option<u32> = None;
    while it.valid() {
        let k = parse_key(it.key()).ok_or_else(|| {
            Check::Violation(format!("secondary: a key no worker writes: {:?}", it.key()))
        })?;
        if prev.is_some_and(|p| p >= k) {
            return Err(Check::Violation(format!(
                "secondary: keys out of order: {prev:?} then {k}"
            )));
        }
        prev = Some(k);
        match value_op(k, it.value()) {
            Some(op) if op < issued => {}
            Some(op) => {
                return Err(Check::Violation(format!(
                    "secondary: key {k} holds the value of op {op}, not issued before the \
                     catch-up ended (next op {issued})"
                )))
            }
            None => {
                return Err(Check::Violation(format!(
                    "secondary: key {k} holds a value no operation wrote: {}",
                    crate::stress::describe(Some(it.value()))
                )))
            }
        }
        *checked += 1;
        it.next();
    }
    it.status().map_err(Check::Engine)
}
