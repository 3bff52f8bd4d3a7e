//! Deterministic synthetic block traces for the prefetching evaluation ("fio-like" jobs).
//!
//! A trace interleaves `jobs` concurrent jobs; each I/O picks a job uniformly, and inter-arrival
//! times are exponential with mean `gap_us`. Job kinds:
//! * `seq`: sequential reads of 4–64 KiB through its own 1 GiB file;
//! * `stride`: reads of 4 KiB every `stride` KiB (16–256) inside its file, restarting after 8 MiB
//!   (a pattern within one prefix: the network's case);
//! * `random`: uniform 4 KiB reads over 64 GiB;
//! * `noisy`: a stride job whose every access is displaced by up to ±16 KiB with probability ¼.
//!
//! Workloads (`kind`): `seq` (all sequential), `stride`, `random`, `mixed` (one job of each kind
//! per four jobs). Same `(kind, n, seed)`, same trace.
//!
//! Thread-safety: pure functions.

use attune_workload::rng::Xoshiro256;
use attune_workload::trace::{BlockRecord, IoKind};

use crate::error::invalid;
use crate::Result;

/// Workload names [`generate`] knows.
pub const KINDS: [&str; 4] = ["seq", "stride", "random", "mixed"];

#[derive(Clone, Copy)]
enum Job {
    Seq {
        base: u64,
        pos: u64,
    },
    Stride {
        base: u64,
        pos: u64,
        stride: u64,
        noisy: bool,
    },
    Random,
}

const GIB: u64 = 1 << 30;

/// The longest trace [`generate`] makes (2^27 I/Os, 4 GiB of records): a bound checked before
/// anything is allocated.
pub const MAX_IOS: usize = 1 << 27;

/// Generates `n` I/Os (at most [`MAX_IOS`]) of workload `kind` with `jobs` concurrent jobs.
pub fn generate(kind: &str, n: usize, jobs: usize, seed: u64) -> Result<Vec<BlockRecord>> {
    if !KINDS.contains(&kind) {
        return Err(invalid(
            "kind",
            kind,
            "unknown synthetic workload; valid: seq, stride, random, mixed",
        ));
    }
    if !(1..=256).contains(&jobs) {
        return Err(invalid("jobs", jobs, "must be in 1..=256"));
    }
    if n > MAX_IOS {
        return Err(invalid("n", n, format!("must be at most {MAX_IOS}")));
    }
    let mut rng = Xoshiro256::new(seed, 0x7f01);
    let mut js: Vec<Job> = (0..jobs as u64)
        .map(|j| {
            let base = (1 + j * 3) * GIB + rng.below(256) * (8 << 20);
            let pick = match kind {
                "seq" => 0,
                "stride" => 1,
                "random" => 2,
                _ => j % 4,
            };
            match pick {
                0 => Job::Seq { base, pos: 0 },
                1 | 3 => Job::Stride {
                    base,
                    pos: 0,
                    stride: 16 << rng.below(5),
                    noisy: pick == 3,
                },
                _ => Job::Random,
            }
        })
        .collect();
    let mut t_ns = 0u64;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let gap = -(rng.next_f64_open0().ln()) * 500_000.0;
        t_ns += gap as u64;
        let j = rng.below(jobs as u64) as usize;
        let (offset, size) = match &mut js[j] {
            Job::Seq { base, pos } => {
                let size = 4096u64 << rng.below(5);
                let off = *base + *pos;
                *pos = (*pos + size) % GIB;
                (off, size)
            }
            Job::Stride {
                base,
                pos,
                stride,
                noisy,
            } => {
                let mut off = *base + *pos;
                if *noisy && rng.below(4) == 0 {
                    off = (off + rng.below(9) * 4096).saturating_sub(16384);
                }
                *pos += *stride * 1024;
                if *pos >= 8 << 20 {
                    *pos = 0;
                    *base += 8 << 20;
                }
                (off, 4096)
            }
            Job::Random => (rng.below(16 << 20) * 4096, 4096),
        };
        out.push(BlockRecord {
            timestamp_ns: t_ns,
            offset,
            size: size as u32,
            kind: IoKind::Read,
            latency_ns: 0,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_trace() {
        let a = generate("mixed", 1000, 8, 3).expect("test setup");
        let b = generate("mixed", 1000, 8, 3).expect("test setup");
        assert_eq!(a, b);
        assert!(a.windows(2).all(|w| w[0].timestamp_ns <= w[1].timestamp_ns));
    }

    #[test]
    fn unknown_workloads_are_rejected() {
        assert!(generate("zipf", 10, 1, 0).is_err());
        assert!(generate("seq", 10, 0, 0).is_err());
        let e = generate("mixed", 1_000_000_000_000, 8, 0).expect_err("too long");
        assert!(e.to_string().contains("`n`"), "{e}");
    }
}
