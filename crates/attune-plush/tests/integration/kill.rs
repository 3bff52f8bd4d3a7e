//! Real process crashes: a child process upserts and deletes, printing each acknowledged
//! operation; the parent SIGKILLs it at a seeded point, reopens the directory and checks every
//! acknowledged operation (the one in flight may have landed or not), over several cycles on
//! the same directory. Durability mode `sync = false`: a process crash must lose nothing.
//! The child is this integration binary re-executed with only `kill::kill_child` selected.
#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::small;
use attune_plush::{Options, Plush};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

const KEYS: u64 = 3000;
const CHILD_ENV: &str = "ATTUNE_PLUSH_KILL_CHILD";

fn options() -> Options {
    Options {
        sync: false,
        ..small()
    }
}

/// Operation `i` of cycle `c`: (key, Some(value)) for a put, (key, None) for a delete.
fn op(c: u64, i: u64) -> (u64, Option<u64>) {
    let key = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 17) % KEYS;
    if i.is_multiple_of(11) {
        (key, None)
    } else {
        (key, Some(c << 32 | i))
    }
}

/// The child: runs operations of cycle `c` until killed, acknowledging each on stdout.
#[test]
fn kill_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (dir, c) = spec.split_once(':').unwrap();
    let c: u64 = c.parse().unwrap();
    let db = Plush::open(std::path::Path::new(dir), options()).unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        match op(c, i) {
            (k, Some(v)) => db.put(k, v).unwrap(),
            (k, None) => db.delete(k).unwrap(),
        }
        writeln!(out, "{i}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn sigkill_cycles_lose_and_resurrect_nothing() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut state: HashMap<u64, Option<u64>> = HashMap::new();
    for c in 1..=6u64 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "kill::kill_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, format!("{}:{c}", dir.path().display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stop_after = 3000 + c * 2500; // seeded, deterministic
        let mut acked = None;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        while let Some(Ok(line)) = lines.next() {
            if let Ok(i) = line.trim().parse::<u64>() {
                acked = Some(i);
                if i + 1 >= stop_after {
                    break;
                }
            }
        }
        // SAFETY: sending SIGKILL to the child this test spawned.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        // Lines the child wrote before it died are acknowledgements too: drain the pipe.
        for line in lines.map_while(Result::ok) {
            if let Ok(i) = line.trim().parse::<u64>() {
                acked = Some(i);
            }
        }
        let acked = acked.expect("the child acknowledged nothing") + 1;
        for i in 0..acked {
            let (k, v) = op(c, i);
            state.insert(k, v);
        }
        let db = Plush::open(dir.path(), options()).unwrap();
        let (fk, fv) = op(c, acked);
        for k in 0..KEYS {
            let got = db.get(k).unwrap();
            let want = state.get(&k).copied().flatten();
            if k == fk && got == fv {
                continue;
            }
            assert_eq!(
                got, want,
                "cycle {c}: key {k} after {acked} acknowledged operations"
            );
        }
        state.insert(fk, db.get(fk).unwrap());
        db.verify().unwrap();
    }
}
