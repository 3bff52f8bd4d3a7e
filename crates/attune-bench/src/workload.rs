//! `attune-bench workload`: nanoseconds per generated item for every generator of
//! attune-workload.
//!
//! Run: `attune-bench workload [--items N] [--out FILE] [--json]`. One row per generator: its
//! name, items, and ns/item (median of 3 runs) both as thread CPU time (robust on a shared
//! machine) and wall time, with the exact command and the machine. A table on stdout unless
//! `--json`. Single-threaded.

use std::hint::black_box;
use std::time::Instant;

use serde::Serialize;

use crate::output::{round_to, Fail, Sink};

use attune_workload::keys::{KeySet, LoadOrder};
use attune_workload::mixgraph::MixGraphConfig;
use attune_workload::trace::{
    write_binary, Arrival, BinaryTraceReader, Combine, Pattern, StreamSpec, TraceGen,
};
use attune_workload::wiscer::WiscerConfig;
use attune_workload::ycsb::{CoreWorkload, YcsbConfig};
use attune_workload::{Op, RequestDist};

fn op_sink(op: Op) -> u64 {
    op.key()
}

/// CPU time of the calling thread in nanoseconds.
fn thread_cpu_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is supported on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

/// Median (wall, thread-CPU) ns/item of three runs of `f`, which must generate `items` items
/// and return a checksum.
fn measure(items: u64, mut f: impl FnMut() -> u64) -> (f64, f64) {
    let mut wall = Vec::new();
    let mut cpu = Vec::new();
    for _ in 0..3 {
        let c0 = thread_cpu_ns();
        let t = Instant::now();
        black_box(f());
        wall.push(t.elapsed().as_nanos() as f64 / items as f64);
        cpu.push((thread_cpu_ns() - c0) as f64 / items as f64);
    }
    wall.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    (wall[1], cpu[1])
}

/// One row: a generator's speed.
#[derive(Serialize)]
struct Row<'a> {
    bench: &'static str,
    generator: &'a str,
    items: u64,
    ns_per_item_cpu: f64,
    ns_per_item_wall: f64,
}

/// Runs `attune-bench workload ARGS`.
pub fn run(args: Vec<String>, sink: &Sink) -> Result<(), Fail> {
    let mut items: u64 = 2_000_000;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--items" => {
                items = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| Fail::Usage("--items needs a positive integer".into()))?;
            }
            "--help" | "-h" => {
                println!("usage: attune-bench workload [--items N] [--out FILE] [--json]");
                return Ok(());
            }
            other => {
                return Err(Fail::Usage(format!(
                    "unknown argument {other}; usage: [--items N] [--out FILE] [--json]"
                )))
            }
        }
    }
    let mut rows: Vec<(String, (f64, f64))> = Vec::new();
    let n = 10_000_000u64;

    for name in [
        "uniform",
        "zipfian:0.99",
        "zipfian:1.2",
        "zipfian-ri:0.99",
        "scrambled",
        "hotspot:0.2:0.8",
        "exponential",
        "latest",
        "sequential",
    ] {
        let d: RequestDist = name.parse().expect("built-in name");
        let ns = measure(items, || {
            let s = d.sampler(n, 1).expect("valid");
            s.take_items(items).fold(0u64, |a, x| a.wrapping_add(x))
        });
        rows.push((format!("dist/{name}"), ns));
    }
    for name in [
        "linear",
        "seg1",
        "seg10",
        "normal",
        "lognormal",
        "uniform-dense",
        "uniform-sparse",
        "osm",
    ] {
        let set = KeySet::from_name(name, items, 1).expect("valid");
        let ns = measure(items, || set.iter().fold(0u64, |a, x| a.wrapping_add(x)));
        rows.push((format!("keys/{name}/sorted-iter"), ns));
        let ns = measure(items, || {
            set.load_iter(LoadOrder::Random(3))
                .expect("valid")
                .fold(0u64, |a, x| a.wrapping_add(x))
        });
        rows.push((format!("keys/{name}/random-order"), ns));
    }
    for (w, name) in [
        (CoreWorkload::A, "a"),
        (CoreWorkload::B, "b"),
        (CoreWorkload::C, "c"),
        (CoreWorkload::D, "d"),
        (CoreWorkload::E, "e"),
        (CoreWorkload::F, "f"),
    ] {
        let cfg = YcsbConfig::core(w, 1_000_000, items, 1);
        let ns = measure(items, || {
            cfg.run()
                .expect("valid")
                .fold(0u64, |a, o| a.wrapping_add(op_sink(o)))
        });
        rows.push((format!("ycsb/{name}"), ns));
    }
    let wcfg = WiscerConfig {
        zipf: 1.0,
        initial_size: 1_000_000,
        operation_count: items,
        fetch_proportion: 0.98,
        insert_proportion: 0.01,
        delete_proportion: 0.01,
        dist_shift_freq: items / 4,
        dist_shift_prct: 25.0,
        ..WiscerConfig::default()
    };
    let ns = measure(items, || {
        let run = wcfg.run().expect("valid");
        run.fold(0u64, |a, o| a.wrapping_add(op_sink(o)))
    });
    rows.push(("wiscer/98-1-1-churn (incl. 1M-key setup)".into(), ns));
    let mcfg = MixGraphConfig::fast20_example(50_000_000, items, 1);
    let ns = measure(items, || {
        mcfg.run()
            .expect("valid")
            .fold(0u64, |a, o| a.wrapping_add(op_sink(o)))
    });
    rows.push(("mixgraph/fast20-example".into(), ns));

    let streams = vec![
        StreamSpec {
            pattern: Pattern::Sequential { run_len: 64 },
            start: 0,
            range_bytes: 1 << 36,
            size: 4096,
            write_fraction: 0.3,
            weight: 1.0,
        },
        StreamSpec {
            pattern: Pattern::Random,
            start: 1 << 36,
            range_bytes: 1 << 36,
            size: 4096,
            write_fraction: 0.0,
            weight: 1.0,
        },
    ];
    let gen = || {
        TraceGen::new(
            streams.clone(),
            Combine::Mixture,
            Arrival::Exponential(1000.0),
            items,
            1,
        )
        .expect("valid")
    };
    let ns = measure(items, || gen().fold(0u64, |a, r| a.wrapping_add(r.offset)));
    rows.push(("trace/generate-mixture".into(), ns));
    let bytes = write_binary(gen(), Vec::new()).expect("in-memory write");
    let ns = measure(items, || {
        write_binary(gen(), Vec::with_capacity(bytes.len()))
            .expect("in-memory write")
            .len() as u64
    });
    rows.push(("trace/generate+encode-binary".into(), ns));
    let ns = measure(items, || {
        BinaryTraceReader::new(&bytes[..])
            .expect("valid header")
            .map(|r| r.map(|r| r.offset).unwrap_or(0))
            .fold(0u64, u64::wrapping_add)
    });
    rows.push(("trace/decode-binary".into(), ns));

    for (name, (wall, cpu)) in rows {
        if sink.human() {
            println!("{name:<44} {cpu:>8.2} ns/item cpu {wall:>8.2} ns/item wall");
        }
        sink.row(&Row {
            bench: "workload",
            generator: &name,
            items,
            ns_per_item_cpu: round_to(cpu, 2),
            ns_per_item_wall: round_to(wall, 2),
        })?;
    }
    Ok(())
}
