//! `attune-bench ingest`: loading N records into an empty database three ways, per engine, in
//! one run on the same data: `put` (one write per record), `batch` (write batches of
//! `--batch` records) and `ingest` (external sorted tables of `--file-records` records built
//! beside the database, then one ingest call that moves them in: Attune's `TableWriter` +
//! `DB::ingest`, RocksDB's `SstFileWriter` + `IngestExternalFile`).
//!
//! Keys are `--records` 16-byte keys in increasing order (a bulk load's input is sorted; the
//! other methods get the same order, their best case), values `--value-bytes` pseudo-random
//! bytes. The time runs from the open database to the end of a flush (every method's data is
//! in tables and durable); closing is not timed. Each run is checked afterwards: 1,000 keys
//! spread over the range read back with their values. Per repeat the order of the methods and
//! engines rotates. An engine without bulk ingest (the `Engine::ingest_sorted` default) skips
//! that method with a note.

use std::path::{Path, PathBuf};
use std::time::Instant;

use attune_workload::rng::SplitMix64;
use serde::Serialize;

use crate::engine::{self, BatchOp, Engine};
use crate::options::{parse_count, parse_size, Compression, EngineSpec, Settings};
use crate::output::{Fail, Sink};
use crate::rundir::RunDir;

const USAGE: &str = "usage: attune-bench ingest [--engines attune,rocksdb] [--records N] \
[--value-bytes SIZE] [--methods put,batch,ingest] [--batch N] [--file-records N] \
[--compression none|lz4|zstd] [--repeat N] [--dir DIR] [--out FILE] [--json]";

/// Keys read back after each load to check it.
const CHECK_KEYS: u64 = 1000;

#[derive(Serialize)]
struct IngestRow {
    bench: &'static str,
    engine: String,
    method: String,
    /// The method again, under the name the report's engine tables group rows by.
    workload: String,
    records: u64,
    value_bytes: u64,
    /// Records per write batch (`batch`) or per external file (`ingest`); 1 for `put`.
    group: u64,
    repeat: u32,
    seconds: f64,
    records_per_s: f64,
    /// `records_per_s` under the name the report's engine tables read.
    ops_per_sec: f64,
    /// Key and value bytes loaded per second.
    mib_per_s: f64,
    settings: serde_json::Value,
}

fn fail<E: std::fmt::Display>(e: E) -> Fail {
    Fail::Run(e.to_string())
}

fn key(i: u64, k: &mut Vec<u8>) {
    k.extend_from_slice(format!("user{i:012}").as_bytes());
}

fn value(i: u64, n: u64, v: &mut Vec<u8>) {
    let mut rng = SplitMix64::new(i);
    while (v.len() as u64) < n {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(n as usize);
}

struct Params {
    records: u64,
    value_bytes: u64,
    batch: u64,
    file_records: u64,
}

pub fn run(args: Vec<String>, sink: &Sink) -> Result<(), Fail> {
    let mut engines = "attune,rocksdb".to_string();
    let mut methods = "put,batch,ingest".to_string();
    let mut p = Params {
        records: 1_000_000,
        value_bytes: 100,
        batch: 1000,
        file_records: 250_000,
    };
    let mut compression = Compression::None;
    let mut repeat = 1u32;
    let mut dir: Option<PathBuf> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| Fail::Usage(format!("{a} needs a value")))
        };
        match a.as_str() {
            "--engines" => engines = val()?,
            "--methods" => methods = val()?,
            "--records" => p.records = parse_count("--records", &val()?).map_err(fail)?.max(1),
            "--value-bytes" => p.value_bytes = parse_size(&val()?).map_err(fail)?,
            "--batch" => p.batch = parse_count("--batch", &val()?).map_err(fail)?.max(1),
            "--file-records" => {
                p.file_records = parse_count("--file-records", &val()?).map_err(fail)?.max(1)
            }
            "--compression" => compression = Compression::parse(&val()?).map_err(fail)?,
            "--repeat" => repeat = val()?.parse::<u32>().map_err(fail)?.max(1),
            "--dir" => dir = Some(val()?.into()),
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(Fail::Usage(format!("unknown option {other}\n{USAGE}"))),
        }
    }
    let specs = EngineSpec::parse_list(&engines).map_err(|e| Fail::Usage(e.to_string()))?;
    let methods: Vec<String> = methods.split(',').map(|m| m.trim().to_string()).collect();
    if let Some(m) = methods
        .iter()
        .find(|m| !["put", "batch", "ingest"].contains(&m.as_str()))
    {
        return Err(Fail::Usage(format!(
            "unknown method {m}: use put, batch, ingest\n{USAGE}"
        )));
    }
    let run_dir = RunDir::new(dir, "ingest")?;
    let base = run_dir.path();
    let settings = Settings {
        compression,
        ..Settings::default()
    };
    let mut runs = Vec::new();
    for spec in &specs {
        for m in &methods {
            runs.push((spec, m.as_str()));
        }
    }
    for r in 0..repeat {
        let n = runs.len();
        for j in 0..n {
            let (spec, method) = runs[(j + r as usize) % n];
            let row = one(base, spec, method, &settings, &p, r);
            match row? {
                Some(row) => {
                    sink.row(&row)?;
                    if sink.human() {
                        println!(
                            "{:10} {:7} {:9.3} s {:12.0} records/s {:8.1} MiB/s",
                            row.engine, row.method, row.seconds, row.records_per_s, row.mib_per_s
                        );
                    }
                }
                None => eprintln!("{}: no bulk ingest, skipped", spec.given),
            }
        }
    }
    Ok(())
}

/// One load into a fresh database; `None` when the engine cannot run the method here.
fn one(
    base: &Path,
    spec: &EngineSpec,
    method: &str,
    base_settings: &Settings,
    p: &Params,
    repeat: u32,
) -> Result<Option<IngestRow>, Fail> {
    let kind = engine::find(&spec.name).map_err(|e| Fail::Usage(e.to_string()))?;
    if let Err(e) = (kind.probe)() {
        eprintln!("{}: {e}; skipped", spec.given);
        return Ok(None);
    }
    let mut s = spec.resolve(base_settings, kind.keys).map_err(fail)?;
    s.compression = s.compression.closest_in(kind.compressions);
    let dir = base.join(format!("{}-{method}", spec.name));
    let scratch = base.join(format!("{}-{method}-files", spec.name));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).map_err(fail)?;
    let db = (kind.open)(&dir, &s).map_err(fail)?;
    let settings = db.settings();
    let (mut k, mut v) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    let group = match method {
        "put" => {
            let mut session = db.session().map_err(fail)?;
            for i in 0..p.records {
                k.clear();
                v.clear();
                key(i, &mut k);
                value(i, p.value_bytes, &mut v);
                session.put(&k, &v).map_err(fail)?;
            }
            1
        }
        "batch" => {
            let mut session = db.session().map_err(fail)?;
            let mut keys = Vec::new();
            let mut values = Vec::new();
            let mut i = 0;
            while i < p.records {
                let end = (i + p.batch).min(p.records);
                keys.clear();
                values.clear();
                for j in i..end {
                    let (mut k, mut v) = (Vec::new(), Vec::new());
                    key(j, &mut k);
                    value(j, p.value_bytes, &mut v);
                    keys.push(k);
                    values.push(v);
                }
                let ops: Vec<BatchOp<'_>> = keys
                    .iter()
                    .zip(&values)
                    .map(|(k, v)| BatchOp::Put(k, v))
                    .collect();
                session.write_batch(&ops).map_err(fail)?;
                i = end;
            }
            p.batch
        }
        _ => {
            let vb = p.value_bytes;
            let mut record = |i: u64, k: &mut Vec<u8>, v: &mut Vec<u8>| {
                key(i, k);
                value(i, vb, v);
            };
            if !db
                .ingest_sorted(&scratch, p.records, p.file_records, &mut record)
                .map_err(fail)?
            {
                db.close().map_err(fail)?;
                let _ = std::fs::remove_dir_all(&dir);
                let _ = std::fs::remove_dir_all(&scratch);
                return Ok(None);
            }
            p.file_records
        }
    };
    db.flush().map_err(fail)?;
    let seconds = t0.elapsed().as_secs_f64();
    check(db.as_ref(), p).map_err(|e| fail(format!("{} {method}: {e}", spec.given)))?;
    db.close().map_err(fail)?;
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&scratch);
    let bytes = p.records * (16 + p.value_bytes);
    Ok(Some(IngestRow {
        bench: "ingest",
        engine: spec.given.clone(),
        method: method.to_string(),
        workload: method.to_string(),
        records: p.records,
        value_bytes: p.value_bytes,
        group,
        repeat,
        seconds,
        records_per_s: p.records as f64 / seconds,
        ops_per_sec: p.records as f64 / seconds,
        mib_per_s: bytes as f64 / seconds / (1 << 20) as f64,
        settings,
    }))
}

/// Reads back keys spread over the loaded range and compares their values.
fn check(db: &dyn Engine, p: &Params) -> Result<(), String> {
    let mut session = db.session().map_err(|e| e.to_string())?;
    let step = (p.records / CHECK_KEYS).max(1);
    let (mut k, mut want, mut got) = (Vec::new(), Vec::new(), Vec::new());
    let mut i = 0;
    while i < p.records {
        k.clear();
        want.clear();
        key(i, &mut k);
        value(i, p.value_bytes, &mut want);
        let found = session.get(&k, &mut got).map_err(|e| e.to_string())?;
        if !found || got != want {
            return Err(format!("record {i} reads back wrong (found: {found})"));
        }
        i += step;
    }
    Ok(())
}
