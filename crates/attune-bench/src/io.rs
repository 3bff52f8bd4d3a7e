//! `attune-bench io`: the speed of Heimdall's quantised inference and of the simulated SSD.
//!
//! Run: `attune-bench io [--decisions N] [--model FILE] [--out FILE] [--json]`. Rows:
//! * `inference/heimdall-p{P}` for P = 1..9: an 11→128→16→1 network (`(10+P)` inputs) with seeded
//!   random weights, or the weights of `--model` for its own P: ns per inference (thread CPU time,
//!   median of 3 runs) and decisions per second (`P × 10^9 / ns`), one core;
//! * `inference/linnos`: LinnOS's 31→256→2 network, per 4 KiB page;
//! * `inference/tinfetch`: TinFetch's 10→128→16→1 suffix network, one prefetch decision (inputs
//!   from a stream history, integer forward pass, the predicted suffix);
//! * `simulate/ssd`: ns per I/O of the simulated SSD on a write-heavy random trace.
//!
//! Inputs cycle through 1024 precomputed random feature vectors, so no call is constant.

use std::hint::black_box;
use std::time::Instant;

use serde::Serialize;

use attune_io::model::{InputKind, MlpFile, QuantizedMlp};
use attune_io::prefetch::tinfetch;
use attune_io::ssd::{IoRequest, Ssd, SsdParams};
use attune_workload::rng::Xoshiro256;
use attune_workload::trace::IoKind;

use crate::output::{round_to, Fail, Sink};

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

/// Median (wall, cpu) ns per item of three runs.
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

fn random_model(kind: InputKind, dims: &[u32], joint: u16, seed: u64) -> MlpFile {
    let mut rng = Xoshiro256::new(seed, 0x10);
    let layers = dims
        .windows(2)
        .map(|w| {
            let s = (2.0 / f64::from(w[0])).sqrt();
            let weights = (0..w[0] * w[1])
                .map(|_| ((rng.next_f64() * 2.0 - 1.0) * s) as f32)
                .collect();
            let bias = (0..w[1]).map(|_| (rng.next_f64() * 0.1) as f32).collect();
            (weights, bias)
        })
        .collect();
    let n = dims[0] as usize;
    MlpFile {
        kind,
        joint,
        dims: dims.to_vec(),
        scale_min: vec![0.0; n],
        scale_max: vec![1000.0; n],
        layers,
        threshold: 0.5,
    }
}

#[derive(Serialize)]
struct Row<'a> {
    bench: &'static str,
    case: &'a str,
    joint: u32,
    items: u64,
    ns_per_item_cpu: f64,
    ns_per_item_wall: f64,
    decisions_per_sec: f64,
    weights: &'a str,
    /// The inference path that ran (`avx2-fixed`, `sse2`, `i16`, `i64`; `-` for the simulator).
    kernel: &'a str,
}

const USAGE: &str = "usage: attune-bench io [--decisions N] [--model FILE] [--out FILE] [--json]";

/// Runs `attune-bench io ARGS`.
pub fn run(args: Vec<String>, sink: &Sink) -> Result<(), Fail> {
    let mut items: u64 = 2_000_000;
    let mut model_path: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--decisions" => {
                items = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| Fail::Usage("--decisions needs a positive integer".into()))?;
            }
            "--model" => {
                model_path = Some(
                    it.next()
                        .ok_or_else(|| Fail::Usage("--model needs a file".into()))?
                        .clone(),
                );
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(Fail::Usage(format!("unknown argument {other}; {USAGE}"))),
        }
    }
    let loaded = match &model_path {
        None => None,
        Some(p) => {
            let bytes =
                std::fs::read(p).map_err(|e| Fail::Usage(format!("cannot read model {p}: {e}")))?;
            Some(
                QuantizedMlp::from_bytes(&bytes)
                    .map_err(|e| Fail::Usage(format!("model {p}: {e}")))?,
            )
        }
    };
    let mut rng = Xoshiro256::new(7, 0x11);
    let inputs: Vec<Vec<f32>> = (0..1024)
        .map(|_| (0..31).map(|_| (rng.next_f64() * 1000.0) as f32).collect())
        .collect();
    // (case, joint size, (wall ns, cpu ns), weights, kernel)
    type Measured<'a> = (String, u32, (f64, f64), &'a str, &'a str);
    let mut rows: Vec<Measured> = Vec::new();
    // Wall and thread CPU ns per decision of one model over the shared inputs.
    let time_decisions = |m: &QuantizedMlp| {
        measure(items, || {
            let mut slow = 0u64;
            for i in 0..items as usize {
                slow += u64::from(m.predicts_slow(black_box(&inputs[i & 1023])));
            }
            slow
        })
    };
    for p in 1..=9u16 {
        let (m, w) = match &loaded {
            Some(m) if m.joint() == usize::from(p) => (m.clone(), "file"),
            _ => {
                let f = random_model(InputKind::Heimdall, &[10 + u32::from(p), 128, 16, 1], p, 1);
                let m = QuantizedMlp::new(&f).map_err(|e| Fail::Usage(e.to_string()))?;
                (m, "random")
            }
        };
        let ns = time_decisions(&m);
        rows.push((
            format!("inference/heimdall-p{p}"),
            u32::from(p),
            ns,
            w,
            m.kernel(),
        ));
    }
    // The live model: Heimdall's inputs plus the 3 in-flight features (13 + P inputs).
    for p in [1u16, 3] {
        let dims = [13 + u32::from(p), 128, 16, 1];
        let f = random_model(InputKind::HeimdallLive, &dims, p, 4);
        let m = QuantizedMlp::new(&f).map_err(|e| Fail::Usage(e.to_string()))?;
        let ns = time_decisions(&m);
        rows.push((
            format!("inference/heimdall-live-p{p}"),
            u32::from(p),
            ns,
            "random",
            m.kernel(),
        ));
    }
    let f = random_model(InputKind::LinnOs, &[31, 256, 2], 1, 2);
    let m = QuantizedMlp::new(&f).map_err(|e| Fail::Usage(e.to_string()))?;
    let n = (items / 4).max(1);
    let ns = measure(n, || {
        let mut slow = 0u64;
        for i in 0..n as usize {
            slow += u64::from(m.predicts_slow(black_box(&inputs[i & 1023])));
        }
        slow
    });
    rows.push((
        "inference/linnos-per-page".into(),
        1,
        ns,
        "random",
        m.kernel(),
    ));
    // TinFetch: a 10→128→16→1 suffix network; one decision = inputs from a stream history plus
    // the integer forward pass.
    let f = random_model(InputKind::TinFetch, &[10, 128, 16, 1], 1, 3);
    let m = QuantizedMlp::new(&f).map_err(|e| Fail::Usage(e.to_string()))?;
    let hist: Vec<[f32; 10]> = inputs
        .iter()
        .map(|v| std::array::from_fn(|i| (v[i] * 8.0).floor()))
        .collect();
    let ns = measure(items, || {
        let mut acc = 0u64;
        let mut x = [0f32; 10];
        for i in 0..items as usize {
            tinfetch::inputs_of(black_box(&hist[i & 1023]), &mut x);
            acc += u64::from(tinfetch::TinFetch::predict(&m, &x));
        }
        acc
    });
    rows.push(("inference/tinfetch".into(), 1, ns, "random", m.kernel()));
    let sim_items = (items / 4).max(1);
    let ns = measure(sim_items, || {
        let p = SsdParams::default();
        let mut ssd = Ssd::new(p, 1).expect("default parameters are valid");
        let mut rng = Xoshiro256::new(3, 0x12);
        let mut acc = 0u64;
        for i in 0..sim_items {
            let write = rng.below(10) < 6;
            let c = ssd.submit(IoRequest {
                time_ns: i * 20_000,
                offset: rng.below(1 << 24) * 4096,
                size: if write { 65_536 } else { 4096 },
                kind: if write { IoKind::Write } else { IoKind::Read },
            });
            acc = acc.wrapping_add(c.finish_ns);
        }
        acc
    });
    rows.push(("simulate/ssd-per-io".into(), 0, ns, "-", "-"));

    for (case, joint, (wall, cpu), weights, kernel) in &rows {
        let per_sec = if *joint > 0 && *cpu > 0.0 {
            f64::from(*joint) * 1e9 / cpu
        } else {
            0.0
        };
        if sink.human() {
            println!(
                "{case:<28} {cpu:>9.2} ns cpu {wall:>9.2} ns wall {:>8.2} M decisions/s",
                per_sec / 1e6
            );
        }
        sink.row(&Row {
            bench: "io",
            case,
            joint: *joint,
            items,
            ns_per_item_cpu: round_to(*cpu, 2),
            ns_per_item_wall: round_to(*wall, 2),
            decisions_per_sec: per_sec.round(),
            weights,
            kernel,
        })?;
    }
    Ok(())
}
