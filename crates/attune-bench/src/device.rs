//! `attune-bench device`: the SSD profiler against planted simulated devices, and the rule
//! checker against a trace with planted violations.
//!
//! Run: `attune-bench device [--file-mib N] [--samples N] [--out FILE] [--json]`. Rows:
//! * `profile/<config>` for six planted configurations (chunk, page, stripe chips; every one with
//!   the write-fragment model on): whether the stripe, desirable write size, chunk, flash page and
//!   hot-location offset were recovered exactly, the wall-clock seconds of the run (both
//!   experiments and the rule, one core), the I/Os issued and the simulated device time;
//! * `profile/<config>-fragments-off`: the first configuration with the write-fragment model
//!   off (`map_fetch_us = 0`): the stripe must come back as "not found";
//! * `profile/c64k-p16k-1chip`: one chip, where the chunk has no visible effect and must come
//!   back as "not found"; `profile/c64k-p16k-2chips-1channel`: two chips on one channel;
//! * `check/planted`: a 20,000-I/O synthetic trace with violations of every rule planted at
//!   known places: violations found, missed and false alarms, and ns per checked I/O.

use std::time::Instant;

use serde::Serialize;

use attune_io::check::{self, RuleParams, TraceIo};
use attune_io::profile::{self, ProfileConfig};
use attune_io::ssd::SsdParams;
use attune_workload::rng::Xoshiro256;

use crate::output::{Fail, Sink};

#[derive(Serialize)]
struct ProfileRow<'a> {
    bench: &'static str,
    kind: &'static str,
    case: &'a str,
    chunk_bytes: u32,
    page_bytes: u32,
    stripe_chips: u32,
    chips: u32,
    map_fetch_us: f64,
    expected_stripe: Option<u32>,
    expected_chunk: Option<u32>,
    expected_page: Option<u32>,
    learned_stripe: Option<u32>,
    learned_desirable_write: Option<u32>,
    learned_chunk: Option<u32>,
    learned_page: Option<u32>,
    learned_hot_offset: Option<u32>,
    stripe_ok: bool,
    desirable_ok: bool,
    chunk_ok: bool,
    page_ok: bool,
    hot_ok: bool,
    recovered: u32,
    min_confidence: f64,
    seconds: f64,
    ios: u64,
    device_seconds: f64,
    file_mib: u64,
    samples_per_group: u32,
}

#[derive(Serialize)]
struct CheckRow {
    bench: &'static str,
    kind: &'static str,
    case: &'static str,
    ios: u64,
    planted: u64,
    found: u64,
    missed: u64,
    false_alarms: u64,
    extra_pages: u64,
    write_amplification: f64,
    ns_per_io: f64,
}

const USAGE: &str = "usage: attune-bench device [--file-mib N] [--samples N] [--out FILE] [--json]";

/// The planted configurations: (name, chunk, page, stripe chips, map_fetch_us, channels, chips
/// per channel). The default device has 8 channels of 4 chips; the last three rows are the
/// one-chip device (the chunk, and with it the hot offset, has no visible effect: expected not
/// found), two chips on one channel (everything visible) and eight chips on one channel with a
/// 128 KiB chunk (the transfers queue on the channel: the hot offset is 80 KiB, not half the
/// chunk).
#[allow(clippy::type_complexity)]
const CONFIGS: [(&str, u32, u32, u32, f64, u32, u32); 10] = [
    ("c64k-p16k-s1", 64 << 10, 16 << 10, 1, 10.0, 8, 4),
    ("c16k-p4k-s4", 16 << 10, 4 << 10, 4, 10.0, 8, 4),
    ("c32k-p8k-s8", 32 << 10, 8 << 10, 8, 10.0, 8, 4),
    ("c128k-p16k-s2", 128 << 10, 16 << 10, 2, 10.0, 8, 4),
    ("c64k-p32k-s4", 64 << 10, 32 << 10, 4, 10.0, 8, 4),
    ("c8k-p4k-s16", 8 << 10, 4 << 10, 16, 10.0, 8, 4),
    (
        "c64k-p16k-s1-fragments-off",
        64 << 10,
        16 << 10,
        1,
        0.0,
        8,
        4,
    ),
    ("c64k-p16k-1chip", 64 << 10, 16 << 10, 1, 10.0, 1, 1),
    (
        "c64k-p16k-2chips-1channel",
        64 << 10,
        16 << 10,
        2,
        10.0,
        1,
        2,
    ),
    (
        "c128k-p16k-8chips-1channel",
        128 << 10,
        16 << 10,
        4,
        10.0,
        1,
        8,
    ),
];

fn positive(it: &mut std::slice::Iter<'_, String>, flag: &str) -> Result<u64, Fail> {
    it.next()
        .and_then(|s| s.parse().ok())
        .filter(|&n: &u64| n > 0)
        .ok_or_else(|| Fail::Usage(format!("{flag} needs a positive integer")))
}

/// Runs `attune-bench device ARGS`.
pub fn run(args: Vec<String>, sink: &Sink) -> Result<(), Fail> {
    let mut cfg = ProfileConfig::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--file-mib" => cfg.file_bytes = positive(&mut it, a)? << 20,
            "--samples" => {
                cfg.samples_per_group = u32::try_from(positive(&mut it, a)?)
                    .map_err(|_| Fail::Usage("--samples is too large".into()))?;
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(Fail::Usage(format!("unknown argument {other}; {USAGE}"))),
        }
    }
    cfg.validate().map_err(|e| Fail::Usage(e.to_string()))?;
    for (name, chunk, page, sc, mf, channels, per_channel) in CONFIGS {
        let p = SsdParams {
            channels,
            chips_per_channel: per_channel,
            chunk_bytes: chunk,
            page_bytes: page,
            mapping_bytes: 4096.min(page),
            stripe_chips: sc,
            map_fetch_us: mf,
            ..SsdParams::default()
        };
        let t = Instant::now();
        let run = profile::profile_simulated(&p, &cfg, 7, &mut |_, _| {})
            .map_err(|e| Fail::Usage(e.to_string()))?;
        let seconds = t.elapsed().as_secs_f64();
        let (stripe, c, pg, hot) = profile::expected(&p, &cfg);
        let l = &run.learned;
        // In the model the desirable write size is the stripe.
        let oks = [
            l.stripe.value == stripe,
            l.desirable_write.value == stripe,
            l.chunk.value == c,
            l.page.value == pg,
            l.hot_offset.value == hot,
        ];
        let min_conf = [
            &l.chunk,
            &l.page,
            &l.hot_offset,
            &l.stripe,
            &l.desirable_write,
        ]
        .iter()
        .filter(|f| f.value.is_some())
        .map(|f| f.confidence)
        .fold(1.0, f64::min);
        if sink.human() {
            println!(
                "{name:<28} stripe {:>7?} desirable {:>7?} chunk {:>7?} page {:>6?} hot {:>6?}  {}/{} exact  {seconds:.2} s",
                l.stripe.value,
                l.desirable_write.value,
                l.chunk.value,
                l.page.value,
                l.hot_offset.value,
                oks.iter().filter(|&&o| o).count(),
                oks.len()
            );
        }
        sink.row(&ProfileRow {
            bench: "device",
            kind: "profile",
            case: &format!("profile/{name}"),
            chunk_bytes: chunk,
            page_bytes: page,
            stripe_chips: sc,
            chips: channels * per_channel,
            map_fetch_us: mf,
            expected_stripe: stripe,
            expected_chunk: c,
            expected_page: pg,
            learned_stripe: l.stripe.value,
            learned_desirable_write: l.desirable_write.value,
            learned_chunk: l.chunk.value,
            learned_page: l.page.value,
            learned_hot_offset: l.hot_offset.value,
            stripe_ok: oks[0],
            desirable_ok: oks[1],
            chunk_ok: oks[2],
            page_ok: oks[3],
            hot_ok: oks[4],
            recovered: oks.iter().filter(|&&o| o).count() as u32,
            min_confidence: min_conf,
            seconds: (seconds * 1000.0).round() / 1000.0,
            ios: run.ios,
            device_seconds: run.device_ns as f64 / 1e9,
            file_mib: cfg.file_bytes >> 20,
            samples_per_group: cfg.samples_per_group,
        })?;
    }
    check_planted(sink)
}

/// A trace of clean I/Os with violations planted at known indices; returns (trace, planted
/// (index, rule) pairs).
fn planted_trace(n: u64) -> (Vec<TraceIo>, Vec<(usize, u8)>) {
    const K: u64 = 1024;
    let mut rng = Xoshiro256::new(11, 0xc4ec);
    let mut ios = Vec::new();
    let mut planted = Vec::new();
    for _ in 0..n {
        let base = rng.below(1 << 16) * 64 * K;
        let (io, rules): (TraceIo, &[u8]) = match rng.below(10) {
            0 => (w(base + 24, 24), &[1, 3]),
            1 => (w(base + 4090, 24), &[1, 3, 5]),
            2 => (w(base + 16 * K + 512, 64 * K), &[3, 4, 5]),
            3 => (r(base, 16 * K), &[2]),
            4 => (w(base, 4 * K), &[1]),
            5 => (r(base + 8 * K, 16 * K), &[]),
            6 => (r(base + 100, 100), &[]),
            _ => (w(base, 64 * K * (1 + rng.below(3))), &[]),
        };
        for &rule in rules {
            planted.push((ios.len(), rule));
        }
        ios.push(io);
    }
    (ios, planted)
}

fn w(offset: u64, size: u64) -> TraceIo {
    TraceIo {
        file: 0,
        offset,
        size,
        write: true,
    }
}

fn r(offset: u64, size: u64) -> TraceIo {
    TraceIo {
        file: 0,
        offset,
        size,
        write: false,
    }
}

fn check_planted(sink: &Sink) -> Result<(), Fail> {
    let (ios, planted) = planted_trace(20_000);
    let params = RuleParams {
        desirable_write: Some(64 << 10),
        stripe: Some(64 << 10),
        chunk: Some(16 << 10),
        page: Some(4 << 10),
        hot_offset: Some(8 << 10),
    };
    let t = Instant::now();
    let mut rep = check::check(&ios, &params);
    let reps = 20;
    for _ in 1..reps {
        rep = check::check(std::hint::black_box(&ios), &params);
    }
    let ns = t.elapsed().as_nanos() as f64 / (reps * ios.len()) as f64;
    let found: std::collections::BTreeSet<(usize, u8)> =
        rep.violations.iter().map(|v| (v.index, v.rule)).collect();
    let want: std::collections::BTreeSet<(usize, u8)> = planted.iter().copied().collect();
    let missed = want.difference(&found).count() as u64;
    let false_alarms = found.difference(&want).count() as u64;
    if sink.human() {
        println!(
            "check/planted: {} planted, {} found, {missed} missed, {false_alarms} false alarms, {ns:.1} ns/I/O",
            want.len(),
            found.len()
        );
    }
    sink.row(&CheckRow {
        bench: "device",
        kind: "check",
        case: "check/planted",
        ios: ios.len() as u64,
        planted: want.len() as u64,
        found: found.len() as u64,
        missed,
        false_alarms,
        extra_pages: rep.extra_pages(),
        write_amplification: (rep.write_amplification(params.page) * 1000.0).round() / 1000.0,
        ns_per_io: (ns * 10.0).round() / 10.0,
    })?;
    Ok(())
}
