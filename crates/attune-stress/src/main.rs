//! `attune-stress`: crash-consistency torture for attune-kv. See the crate doc and
//! docs/RELIABILITY.md. Exit status: 0 when no violation was found, 1 on a violation (the seed
//! and the replay command are printed), 2 on a usage error.

use attune_stress::{run_child, run_kill, run_mem, Config, Engine, Mode};
use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "attune-stress",
    about = "Random operations, crashes and recoveries against an expected-state oracle"
)]
struct Args {
    /// How long to run, e.g. 60s, 10m, 1h.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    duration: Duration,
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Seed of every random choice; a failure prints it with the command that replays it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// mem: simulated machine crashes and faults on an in-memory Env; kill: SIGKILL of a child
    /// process on the real file system.
    #[arg(long, default_value = "mem", value_parser = ["mem", "kill"])]
    mode: String,
    /// db: attune-kv's DB (the LSM tree); hash: the Plush hash table (attune.HashDB), kill mode
    /// only (its simulated crashes are attune-plush's crash tests).
    #[arg(long, default_value = "db", value_parser = ["db", "hash"])]
    engine: String,
    /// Stop after this many crash/recover cycles (0: run for --duration).
    #[arg(long, default_value_t = 0)]
    cycles: u64,
    /// Keys in the key space.
    #[arg(long, default_value_t = attune_stress::stress::KEYS_DEFAULT)]
    keys: u32,
    /// Database directory for kill mode (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Internal: run as the child of kill mode.
    #[arg(long, hide = true)]
    child: bool,
    #[arg(long, hide = true, default_value_t = 0)]
    cycle: u64,
    #[arg(long, hide = true, default_value_t = 1)]
    op_base: u64,
    /// Internal: write the valid seed inputs of every fuzz target under this directory.
    #[arg(long, hide = true)]
    write_fuzz_seeds: Option<PathBuf>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("bad duration {s:?} (try 60s, 10m, 1h)"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "ms" => return Ok(Duration::from_millis(n)),
        _ => return Err(format!("bad duration unit in {s:?} (use ms, s, m or h)")),
    };
    Ok(Duration::from_secs(secs))
}

fn main() {
    let a = Args::parse();
    if let Some(dir) = &a.write_fuzz_seeds {
        for t in attune_stress::decoders::TARGETS {
            let d = dir.join(t);
            for (i, s) in attune_stress::decoders::seeds(t).iter().enumerate() {
                let r = std::fs::create_dir_all(&d)
                    .and_then(|_| std::fs::write(d.join(format!("seed{i}")), s));
                if let Err(e) = r {
                    eprintln!("attune-stress: writing seeds to {}: {e}", d.display());
                    std::process::exit(2);
                }
            }
        }
        return;
    }
    if a.threads == 0 || a.keys < 10 {
        eprintln!("attune-stress: --threads must be at least 1 and --keys at least 10");
        std::process::exit(2);
    }
    let engine = if a.engine == "hash" {
        Engine::Hash
    } else {
        Engine::Db
    };
    if engine == Engine::Hash && (a.mode != "kill" || a.keys > attune_stress::hash::KEYS_MAX) {
        eprintln!(
            "attune-stress: --engine hash needs --mode kill and at most {} --keys",
            attune_stress::hash::KEYS_MAX
        );
        std::process::exit(2);
    }
    let cfg = Config {
        mode: if a.mode == "kill" {
            Mode::Kill
        } else {
            Mode::Mem
        },
        engine,
        seed: a.seed,
        threads: a.threads,
        duration: a.duration,
        cycles_max: a.cycles,
        keys: a.keys,
        dir: a.dir.clone(),
        exe: None,
    };
    if a.child {
        let Some(dir) = a.dir else {
            eprintln!("attune-stress: --child needs --dir");
            std::process::exit(2);
        };
        if let Err(e) = run_child(&cfg, &dir, a.cycle, a.op_base) {
            eprintln!("{e}");
            std::process::exit(1);
        }
        return;
    }
    let r = match cfg.mode {
        Mode::Mem => run_mem(&cfg),
        Mode::Kill => run_kill(&cfg),
    };
    match r {
        Ok(report) => {
            if a.json {
                println!("{}", serde_json::to_string(&report).unwrap_or_default());
            } else {
                println!(
                    "attune-stress {} {} seed {}: {} cycles ({} machine crashes, {} torn, {} clean \
                     closes, {} SIGKILLs), {} operations, {} writes acknowledged, {} keys \
                     verified, {} faults injected, {} secondary catch-ups ({} keys checked), \
                     0 violations in {:.1} s",
                    report.engine,
                    report.mode,
                    report.seed,
                    report.cycles,
                    report.machine_crashes,
                    report.torn_crashes,
                    report.clean_closes,
                    report.sigkills,
                    report.operations,
                    report.writes_acked,
                    report.keys_verified,
                    report.faults_injected,
                    report.secondary_catch_ups,
                    report.secondary_keys_checked,
                    report.seconds
                );
            }
        }
        Err(v) => {
            if a.json {
                println!("{}", serde_json::to_string(&v.report).unwrap_or_default());
            }
            eprintln!("attune-stress: {v}");
            std::process::exit(1);
        }
    }
}
