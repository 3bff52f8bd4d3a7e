//! Stress: pipes cancelled and dropped mid-flight, in every mechanism. What must hold: no
//! request outlives its buffer (memory dropped with a transfer in flight aborts the process,
//! see locator.rs), every transfer ends (done or cancelled, never hung), and when the last
//! handle of a runtime is gone no request is in flight anywhere. Deterministic: one seeded
//! stream of decisions per mechanism (the seed is printed on failure). Its own test binary:
//! `requests_in_flight` counts the whole process, so no other test may run beside it.
#![allow(clippy::unwrap_used)]

use attune_pipes::{
    requests_in_flight, Error, FileOptions, Locator, Mechanism, MechanismChoice, PipeOptions,
    Runtime, RuntimeOptions, Transfer,
};
use attune_workload::rng::SplitMix64;

const FILE_BYTES: u64 = 4 << 20;

#[test]
fn cancelling_and_dropping_pipes_mid_flight_never_frees_a_buffer_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let data: Vec<u8> = (0..FILE_BYTES).map(|i| (i % 251) as u8).collect();
    std::fs::write(&input, &data).unwrap();
    for (mi, m) in [Mechanism::IoUring, Mechanism::Threads, Mechanism::Mmap]
        .into_iter()
        .enumerate()
    {
        let seed = 0x5eed + mi as u64;
        let mut rng = SplitMix64::new(seed);
        for round in 0..12 {
            let rt = Runtime::new(RuntimeOptions {
                mechanism: MechanismChoice::Only(m),
                queue_depth: 1 + (rng.next_u64() % 16) as u32,
                block_bytes: 4096 << (rng.next_u64() % 4),
                ..Default::default()
            })
            .unwrap();
            let mut kept: Vec<(Transfer, bool)> = Vec::new();
            for _ in 0..6 {
                let src = Locator::file(&input, FileOptions::default()).unwrap();
                let mem = Locator::dram(FILE_BYTES).unwrap();
                let out = Locator::file(
                    dir.path().join(format!("out-{mi}-{round}")),
                    FileOptions {
                        create: true,
                        ..Default::default()
                    },
                )
                .unwrap();
                let up = rt.pipe(&src, &mem, PipeOptions::default()).unwrap();
                let down = rt.pipe(&mem, &out, PipeOptions::default()).unwrap();
                for _ in 0..3 {
                    let len = 4096 * (1 + rng.next_u64() % (FILE_BYTES / 4096));
                    let t = up.transfer(0, 0, len).unwrap();
                    let t2 = down.transfer(0, 0, len);
                    // The memory is in use by `t`; the write may share it (both only read it
                    // or the kernel writes it: the library never hands the bytes out meanwhile).
                    match rng.next_u64() % 4 {
                        0 => t.cancel(),
                        1 => drop(t.clone()),
                        2 => kept.push((t.clone(), false)),
                        _ => kept.push((t.clone(), true)),
                    }
                    if let Ok(t2) = t2 {
                        if rng.next_u64().is_multiple_of(2) {
                            t2.cancel();
                        }
                        kept.push((t2, false));
                    }
                    assert!(mem.bytes().is_err() || mem.transfers_in_flight() == 0);
                }
                // Drop the pipes and the locators (maybe the runtime too) while requests fly.
                match rng.next_u64() % 3 {
                    0 => drop((up, down, src, mem, out)),
                    1 => {
                        drop(up);
                        drop(mem);
                        drop(down);
                    }
                    _ => {}
                }
            }
            let drop_runtime_first = rng.next_u64().is_multiple_of(2);
            let mut rt = Some(rt);
            if drop_runtime_first {
                drop(rt.take());
            }
            for (t, check) in &kept {
                match t.wait() {
                    Ok(n) => assert!(n > 0),
                    Err(Error::Cancelled { .. }) => {}
                    Err(e) => panic!("seed {seed} round {round}: unexpected {e}"),
                }
                if *check {
                    assert!(t.is_done());
                }
            }
            drop(kept);
            drop(rt.take());
            assert_eq!(
                requests_in_flight(),
                0,
                "seed {seed} round {round}: requests outlived the runtime"
            );
        }
    }
}
