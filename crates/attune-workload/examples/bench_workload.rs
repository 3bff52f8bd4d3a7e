//! Micro benchmark: nanoseconds per generated item for every generator of attune-workload.
//!
//! Run: `cargo run --release -p attune-workload --example bench_workload -- [--items N]
//! [--out FILE]`. Prints one JSON object per line (and appends them to FILE if given), each with
//! the exact command, the machine, the generator name, items, and ns/item (median of 3 runs) both
//! as thread CPU time (robust on a shared machine) and wall time. Single-threaded.

use std::fs::OpenOptions;
use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

use attune_workload::keys::{KeySet, LoadOrder};
use attune_workload::mixgraph::MixGraphConfig;
use attune_workload::trace::{
    write_binary, Arrival, BinaryTraceReader, Combine, Pattern, StreamSpec, TraceGen,
};
use attune_workload::wiscer::WiscerConfig;
use attune_workload::ycsb::{CoreWorkload, YcsbConfig};
use attune_workload::{Op, RequestDist};

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{{\"nproc\":{nproc},\"cpu\":\"{}\",\"kernel\":\"{}\"}}",
        cpu.replace('"', "'"),
        kernel
    )
}

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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut items: u64 = 2_000_000;
    let mut out: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--items" => {
                items = args
                    .get(i + 1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| {
                        eprintln!("--items needs a positive integer");
                        std::process::exit(2)
                    });
                i += 2;
            }
            "--out" => {
                out = args.get(i + 1).cloned();
                i += 2;
            }
            other => {
                eprintln!("unknown argument {other}; usage: [--items N] [--out FILE]");
                std::process::exit(2);
            }
        }
    }
    let command = format!(
        "cargo run --release -p attune-workload --example bench_workload --{}",
        args.iter().map(|a| format!(" {a}")).collect::<String>()
    );
    let machine = machine();
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

    let mut file = out.as_ref().map(|p| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap_or_else(|e| {
                eprintln!("cannot open {p}: {e}");
                std::process::exit(1)
            })
    });
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "null".into());
    for (name, (wall, cpu)) in rows {
        let line = format!(
            "{{\"bench\":\"workload\",\"generator\":\"{name}\",\"items\":{items},\
             \"ns_per_item_cpu\":{cpu:.2},\"ns_per_item_wall\":{wall:.2},\"loadavg_1m\":{load},\
             \"command\":\"{command}\",\"machine\":{machine}}}"
        );
        println!("{line}");
        if let Some(f) = file.as_mut() {
            if let Err(e) = writeln!(f, "{line}") {
                eprintln!("write failed: {e}");
                std::process::exit(1);
            }
        }
    }
}
