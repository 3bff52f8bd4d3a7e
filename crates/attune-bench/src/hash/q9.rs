//! `attune-bench hash --mode q9 --data DIR`: TPC-H query 9 executed by a hand-written plan whose
//! hash joins run on the table under test (VIP, chained or hashbrown).
//!
//! The plan is DuckDB's own plan for Q9 (single-threaded, `EXPLAIN` on the same data), with
//! every hash join built and probed through one [`JoinHt`]:
//!
//! ```text
//!   HT_p   = build(part where p_green)                         -- the LIKE '%green%' filter
//!   PS     = partsupp ⋈ HT_p                                   -- probe with ps_partkey
//!   HT_n   = build(nation);  SN = supplier ⋈ HT_n              -- probe with s_nationkey
//!   HT_s   = build(SN);      PSN = PS ⋈ HT_s                   -- probe with ps_suppkey
//!   HT_a   = build(PSN on (ps_partkey, ps_suppkey))            -- payload: supplycost, nation
//!   HT_o   = build(orders on o_orderkey)                       -- payload: year
//!   for each vector of 2048 lineitem rows:
//!       probe HT_a with (l_partkey, l_suppkey); probe HT_o with l_orderkey of the matches;
//!       sum l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity by (nation, year)
//! ```
//!
//! Money is kept in cents and the profit sum in units of 1e-4, exactly as DuckDB's
//! `DECIMAL(15,2)` arithmetic does, so the driver (`attune bench hash-q9`) checks that every
//! table and DuckDB return the same groups and the same sum to the last unit.
//!
//! VIP learning budgets are `min(|R|, est(|S|) / 61)` probes per join (the source's §3.6.1.2
//! rule), with `est(|S|)` what a planner knows from the catalog: the exact input size for the
//! scans (partsupp, supplier, lineitem), and for HT_o the lineitem count times the fraction of
//! partsupp rows that reached HT_a (the uniform-foreign-key estimate).
//!
//! Data: one file per column under DIR, little-endian 8-byte integers (`.u64` / `.i64`, money in
//! cents) or bytes (`.u8`), written by the Python driver from tpchgen-cli's tables.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use super::{cpus_allowed, Args, BenchError, StdMap, TableKind, Timer};
use crate::output::Sink;
use attune_hash::{JoinMode, JoinTable, VipStats};

/// Rows per probe vector (DuckDB's vector size).
const VECTOR: usize = 2048;
/// Years of TPC-H order dates: 1992..=1998.
const FIRST_YEAR: u64 = 1992;
const YEARS: usize = 7;
const NATIONS: usize = 25;

/// The columns Q9 reads.
struct Data {
    p_partkey: Vec<u64>,
    p_green: Vec<u8>,
    ps_partkey: Vec<u64>,
    ps_suppkey: Vec<u64>,
    ps_supplycost: Vec<i64>,
    s_suppkey: Vec<u64>,
    s_nationkey: Vec<u64>,
    n_nationkey: Vec<u64>,
    o_orderkey: Vec<u64>,
    o_year: Vec<u64>,
    l_orderkey: Vec<u64>,
    l_partkey: Vec<u64>,
    l_suppkey: Vec<u64>,
    l_quantity: Vec<i64>,
    l_extendedprice: Vec<i64>,
    l_discount: Vec<i64>,
}

fn read_bytes(dir: &Path, name: &str) -> Result<Vec<u8>, BenchError> {
    let path = dir.join(name);
    std::fs::read(&path).map_err(|e| BenchError::Output(format!("{}: {e}", path.display())))
}

fn read_u64(dir: &Path, name: &str) -> Result<Vec<u64>, BenchError> {
    let bytes = read_bytes(dir, name)?;
    if bytes.len() % 8 != 0 {
        return Err(BenchError::Output(format!(
            "{}: {} bytes is not a whole number of 8-byte values",
            dir.join(name).display(),
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8-byte chunk")))
        .collect())
}

fn read_i64(dir: &Path, name: &str) -> Result<Vec<i64>, BenchError> {
    Ok(read_u64(dir, name)?.into_iter().map(|v| v as i64).collect())
}

impl Data {
    fn load(dir: &Path) -> Result<Data, BenchError> {
        let d = Data {
            p_partkey: read_u64(dir, "p_partkey.u64")?,
            p_green: read_bytes(dir, "p_green.u8")?,
            ps_partkey: read_u64(dir, "ps_partkey.u64")?,
            ps_suppkey: read_u64(dir, "ps_suppkey.u64")?,
            ps_supplycost: read_i64(dir, "ps_supplycost.i64")?,
            s_suppkey: read_u64(dir, "s_suppkey.u64")?,
            s_nationkey: read_u64(dir, "s_nationkey.u64")?,
            n_nationkey: read_u64(dir, "n_nationkey.u64")?,
            o_orderkey: read_u64(dir, "o_orderkey.u64")?,
            o_year: read_u64(dir, "o_year.u64")?,
            l_orderkey: read_u64(dir, "l_orderkey.u64")?,
            l_partkey: read_u64(dir, "l_partkey.u64")?,
            l_suppkey: read_u64(dir, "l_suppkey.u64")?,
            l_quantity: read_i64(dir, "l_quantity.i64")?,
            l_extendedprice: read_i64(dir, "l_extendedprice.i64")?,
            l_discount: read_i64(dir, "l_discount.i64")?,
        };
        let same = |what: &str, lens: &[usize]| {
            if lens.windows(2).all(|w| w[0] == w[1]) {
                Ok(())
            } else {
                Err(BenchError::Output(format!(
                    "{}: the {what} columns differ in length: {lens:?}",
                    dir.display()
                )))
            }
        };
        same("part", &[d.p_partkey.len(), d.p_green.len()])?;
        same(
            "partsupp",
            &[
                d.ps_partkey.len(),
                d.ps_suppkey.len(),
                d.ps_supplycost.len(),
            ],
        )?;
        same("supplier", &[d.s_suppkey.len(), d.s_nationkey.len()])?;
        same("orders", &[d.o_orderkey.len(), d.o_year.len()])?;
        same(
            "lineitem",
            &[
                d.l_orderkey.len(),
                d.l_partkey.len(),
                d.l_suppkey.len(),
                d.l_quantity.len(),
                d.l_extendedprice.len(),
                d.l_discount.len(),
            ],
        )?;
        if d.n_nationkey.iter().any(|&n| n as usize >= NATIONS) {
            return Err(BenchError::Output("nation keys must be below 25".into()));
        }
        if d.o_year
            .iter()
            .any(|&y| !(FIRST_YEAR..FIRST_YEAR + YEARS as u64).contains(&y))
        {
            return Err(BenchError::Output(
                "order years must be in 1992..=1998".into(),
            ));
        }
        if [&d.ps_partkey, &d.ps_suppkey, &d.l_partkey, &d.l_suppkey]
            .iter()
            .any(|c| c.iter().any(|&k| k >= 1 << 32))
        {
            return Err(BenchError::Output(
                "part and supplier keys must fit in 32 bits (composite key)".into(),
            ));
        }
        Ok(d)
    }
}

/// A hash-join build table: primary key -> build row.
trait JoinHt: Sized {
    fn build(keys: &[u64]) -> Result<Self, BenchError>;
    /// Starts the probe; `est_probe_rows` is the planner's estimate of the probe side.
    fn begin(&mut self, est_probe_rows: usize, vip: bool) -> Result<(), BenchError>;
    /// Probes `keys`, appending `(build_row, index in keys)` per match.
    fn probe(&mut self, keys: &[u64], out: &mut Vec<(u32, u32)>) -> Result<(), BenchError>;
    fn stats(&self) -> Option<VipStats>;
}

impl JoinHt for JoinTable {
    fn build(keys: &[u64]) -> Result<Self, BenchError> {
        Ok(JoinTable::build(keys)?)
    }
    fn begin(&mut self, est_probe_rows: usize, vip: bool) -> Result<(), BenchError> {
        let mode = if vip {
            JoinMode::Vip
        } else {
            JoinMode::Default
        };
        Ok(self.begin_probe(est_probe_rows, mode)?)
    }
    #[inline]
    fn probe(&mut self, keys: &[u64], out: &mut Vec<(u32, u32)>) -> Result<(), BenchError> {
        self.probe_rows(keys, 0, out)?;
        Ok(())
    }
    fn stats(&self) -> Option<VipStats> {
        Some(JoinTable::stats(self))
    }
}

impl JoinHt for StdMap<u32> {
    fn build(keys: &[u64]) -> Result<Self, BenchError> {
        let mut m = StdMap::with_capacity_and_hasher(keys.len(), Default::default());
        for (i, &k) in keys.iter().enumerate() {
            if m.insert(k, i as u32).is_some() {
                return Err(BenchError::Output(format!(
                    "duplicate primary key {k} at build row {i}"
                )));
            }
        }
        Ok(m)
    }
    fn begin(&mut self, _est: usize, _vip: bool) -> Result<(), BenchError> {
        Ok(())
    }
    #[inline]
    fn probe(&mut self, keys: &[u64], out: &mut Vec<(u32, u32)>) -> Result<(), BenchError> {
        for (i, k) in keys.iter().enumerate() {
            if let Some(&r) = self.get(k) {
                out.push((r, i as u32));
            }
        }
        Ok(())
    }
    fn stats(&self) -> Option<VipStats> {
        None
    }
}

/// Probes `ht` with `keys` in vectors, returning all `(build_row, probe_row)` matches.
fn probe_all<T: JoinHt>(ht: &mut T, keys: &[u64]) -> Result<Vec<(u32, u32)>, BenchError> {
    let mut out = Vec::new();
    let mut part = Vec::with_capacity(VECTOR);
    for (v, chunk) in keys.chunks(VECTOR).enumerate() {
        part.clear();
        ht.probe(chunk, &mut part)?;
        let base = (v * VECTOR) as u32;
        out.extend(part.iter().map(|&(r, i)| (r, base + i)));
    }
    Ok(out)
}

#[inline]
fn composite(partkey: u64, suppkey: u64) -> u64 {
    (partkey << 32) | suppkey
}

/// What one execution of the plan returns and measured.
#[derive(Default)]
struct Q9Run {
    cpu_seconds: f64,
    wall_seconds: f64,
    /// CPU seconds of the builds and of the small joins (everything before the lineitem scan).
    build_seconds: f64,
    /// CPU seconds of the lineitem pipeline (the two big probes and the aggregation).
    probe_seconds: f64,
    /// `sum(amount)` in units of 1e-4 over all groups.
    profit_e4: i64,
    groups: usize,
    /// Rows out of the lineitem ⋈ HT_a probe (the input of the HT_o probe).
    a_matches: u64,
    a_stats: Option<VipStats>,
    o_stats: Option<VipStats>,
}

fn q9<T: JoinHt>(d: &Data, vip: bool) -> Result<Q9Run, BenchError> {
    let t0 = Timer::start();
    // part where p_name like '%green%' (the mask), then partsupp ⋈ part.
    let green: Vec<u64> = d
        .p_partkey
        .iter()
        .zip(&d.p_green)
        .filter(|(_, &g)| g != 0)
        .map(|(&k, _)| k)
        .collect();
    let mut ht_p = T::build(&green)?;
    ht_p.begin(d.ps_partkey.len(), vip)?;
    let ps_rows: Vec<u32> = probe_all(&mut ht_p, &d.ps_partkey)?
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    // supplier ⋈ nation.
    let mut ht_n = T::build(&d.n_nationkey)?;
    ht_n.begin(d.s_nationkey.len(), vip)?;
    let sn = probe_all(&mut ht_n, &d.s_nationkey)?;
    let sn_keys: Vec<u64> = sn.iter().map(|&(_, s)| d.s_suppkey[s as usize]).collect();
    let sn_nation: Vec<u8> = sn
        .iter()
        .map(|&(n, _)| d.n_nationkey[n as usize] as u8)
        .collect();
    // (partsupp ⋈ part) ⋈ (supplier ⋈ nation) on ps_suppkey.
    let mut ht_s = T::build(&sn_keys)?;
    ht_s.begin(ps_rows.len(), vip)?;
    let ps_supp: Vec<u64> = ps_rows.iter().map(|&r| d.ps_suppkey[r as usize]).collect();
    let psn = probe_all(&mut ht_s, &ps_supp)?;
    let mut a_keys = Vec::with_capacity(psn.len());
    let mut a_cost = Vec::with_capacity(psn.len());
    let mut a_nation = Vec::with_capacity(psn.len());
    for &(s, i) in &psn {
        let r = ps_rows[i as usize] as usize;
        a_keys.push(composite(d.ps_partkey[r], d.ps_suppkey[r]));
        a_cost.push(d.ps_supplycost[r]);
        a_nation.push(sn_nation[s as usize]);
    }
    let mut ht_a = T::build(&a_keys)?;
    let mut ht_o = T::build(&d.o_orderkey)?;
    let n_li = d.l_partkey.len();
    ht_a.begin(n_li, vip)?;
    let est_o = if d.ps_partkey.is_empty() {
        0
    } else {
        (n_li as f64 * a_keys.len() as f64 / d.ps_partkey.len() as f64) as usize
    };
    ht_o.begin(est_o, vip)?;
    let build_seconds = t0.stop().0;

    // The lineitem pipeline.
    let t1 = Timer::start();
    let mut sums = [0i64; NATIONS * YEARS];
    let mut seen = [false; NATIONS * YEARS];
    let (mut keys, mut m_a, mut o_keys, mut m_o) = (
        Vec::with_capacity(VECTOR),
        Vec::with_capacity(VECTOR),
        Vec::with_capacity(VECTOR),
        Vec::with_capacity(VECTOR),
    );
    let mut a_matches = 0u64;
    for start in (0..n_li).step_by(VECTOR) {
        let end = (start + VECTOR).min(n_li);
        keys.clear();
        keys.extend(
            d.l_partkey[start..end]
                .iter()
                .zip(&d.l_suppkey[start..end])
                .map(|(&p, &s)| composite(p, s)),
        );
        m_a.clear();
        ht_a.probe(&keys, &mut m_a)?;
        a_matches += m_a.len() as u64;
        o_keys.clear();
        o_keys.extend(m_a.iter().map(|&(_, i)| d.l_orderkey[start + i as usize]));
        m_o.clear();
        ht_o.probe(&o_keys, &mut m_o)?;
        for &(o, j) in &m_o {
            let (a, i) = m_a[j as usize];
            let li = start + i as usize;
            let amount = d.l_extendedprice[li] * (100 - d.l_discount[li])
                - a_cost[a as usize] * d.l_quantity[li];
            let g = a_nation[a as usize] as usize * YEARS
                + (d.o_year[o as usize] - FIRST_YEAR) as usize;
            sums[g] += amount;
            seen[g] = true;
        }
    }
    let probe_seconds = t1.stop().0;
    let (cpu_seconds, wall_seconds) = t0.stop();
    Ok(Q9Run {
        cpu_seconds,
        wall_seconds,
        build_seconds,
        probe_seconds,
        profit_e4: sums.iter().sum(),
        groups: seen.iter().filter(|&&s| s).count(),
        a_matches,
        a_stats: ht_a.stats(),
        o_stats: ht_o.stats(),
    })
}

fn run_kind(kind: TableKind, d: &Data) -> Result<Q9Run, BenchError> {
    match kind {
        TableKind::Vip => q9::<JoinTable>(d, true),
        TableKind::Chained => q9::<JoinTable>(d, false),
        TableKind::Hashbrown => q9::<StdMap<u32>>(d, false),
        other => Err(BenchError::Usage(format!(
            "{} is not a table of --mode q9 (vip, chained, hashbrown)",
            other.name()
        ))),
    }
}

#[derive(Serialize)]
struct Row<'a> {
    table: &'static str,
    mode: &'static str,
    query: &'static str,
    zipf: f64,
    seed: u64,
    data: String,
    lineitem_rows: usize,
    cpu_seconds: f64,
    wall_seconds: f64,
    /// 1 / cpu_seconds (higher is better, for the report's ratios).
    queries_per_sec: f64,
    build_seconds: f64,
    probe_seconds: f64,
    speedup_vs_chained: Option<f64>,
    speedup_vs_hashbrown: Option<f64>,
    profit_e4: i64,
    groups: usize,
    a_matches: u64,
    a_avg_displacement: Option<f64>,
    o_avg_displacement: Option<f64>,
    a_learn_fetches: Option<u64>,
    o_learn_fetches: Option<u64>,
    repeat: usize,
    cpus_allowed: Option<&'a str>,
}

/// Runs Q9 once per table and repeat (rotating the order), reports each table's median run.
pub(super) fn run(args: &Args, sink: &Sink) -> Result<(), BenchError> {
    let dir = args
        .data
        .as_deref()
        .ok_or_else(|| BenchError::Usage("--mode q9 needs --data DIR".into()))?;
    let d = Data::load(Path::new(dir))?;
    let zipf = args.zipfs.first().copied().unwrap_or(0.0);
    let seed = args.seeds.first().copied().unwrap_or(0);
    let mut runs: HashMap<usize, Vec<Q9Run>> = HashMap::new();
    let n = args.tables.len();
    for r in 0..args.repeat {
        for j in 0..n {
            let i = (r + j) % n;
            runs.entry(i)
                .or_default()
                .push(run_kind(args.tables[i], &d)?);
        }
    }
    let mut med: Vec<Q9Run> = (0..n)
        .map(|i| {
            let mut rs = runs.remove(&i).unwrap_or_default();
            rs.sort_by(|a, b| a.cpu_seconds.total_cmp(&b.cpu_seconds));
            let mid = rs.len() / 2;
            rs.swap_remove(mid)
        })
        .collect();
    let first = &med[0];
    for (k, r) in args.tables.iter().zip(&med) {
        if (r.profit_e4, r.groups) != (first.profit_e4, first.groups) {
            return Err(BenchError::Output(format!(
                "{} returned sum {} over {} groups, {} returned {} over {}",
                k.name(),
                r.profit_e4,
                r.groups,
                args.tables[0].name(),
                first.profit_e4,
                first.groups
            )));
        }
    }
    let find = |kind: TableKind| {
        args.tables
            .iter()
            .position(|&t| t == kind)
            .map(|i| med[i].cpu_seconds)
    };
    let (chained, hashbrown) = (find(TableKind::Chained), find(TableKind::Hashbrown));
    let cpus = cpus_allowed();
    for (kind, r) in args.tables.iter().zip(med.iter_mut()) {
        if sink.human() {
            println!(
                "q9 {:9} zipf={zipf:<4} {:.3} s cpu (build {:.3}, lineitem {:.3})  vs_chained={}",
                kind.name(),
                r.cpu_seconds,
                r.build_seconds,
                r.probe_seconds,
                chained
                    .map(|c| format!("{:.3}", c / r.cpu_seconds))
                    .unwrap_or("-".into())
            );
        }
        sink.row(&Row {
            table: kind.name(),
            mode: "q9",
            query: "tpch-q9",
            zipf,
            seed,
            data: dir.to_string(),
            lineitem_rows: d.l_partkey.len(),
            cpu_seconds: r.cpu_seconds,
            wall_seconds: r.wall_seconds,
            queries_per_sec: 1.0 / r.cpu_seconds,
            build_seconds: r.build_seconds,
            probe_seconds: r.probe_seconds,
            speedup_vs_chained: chained.map(|c| c / r.cpu_seconds),
            speedup_vs_hashbrown: hashbrown.map(|h| h / r.cpu_seconds),
            profit_e4: r.profit_e4,
            groups: r.groups,
            a_matches: r.a_matches,
            a_avg_displacement: r.a_stats.map(|s| s.avg_displacement()),
            o_avg_displacement: r.o_stats.map(|s| s.avg_displacement()),
            a_learn_fetches: r.a_stats.map(|s| s.learn_fetches),
            o_learn_fetches: r.o_stats.map(|s| s.learn_fetches),
            repeat: args.repeat,
            cpus_allowed: cpus.as_deref(),
        })
        .map_err(BenchError::Output)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny Q9 instance whose answer is worked out by hand.
    fn tiny() -> Data {
        Data {
            p_partkey: vec![1, 2, 3],
            p_green: vec![1, 0, 1],
            ps_partkey: vec![1, 1, 2, 3],
            ps_suppkey: vec![10, 11, 10, 11],
            ps_supplycost: vec![100, 200, 300, 400],
            s_suppkey: vec![10, 11],
            s_nationkey: vec![3, 7],
            n_nationkey: (0..25).collect(),
            o_orderkey: vec![100, 101],
            o_year: vec![1992, 1995],
            // rows: (order, part, supp, qty, price, disc)
            l_orderkey: vec![100, 101, 100, 101, 100],
            l_partkey: vec![1, 1, 2, 3, 3],
            l_suppkey: vec![10, 11, 10, 11, 10],
            l_quantity: vec![200, 100, 100, 300, 100],
            l_extendedprice: vec![1000, 2000, 3000, 4000, 5000],
            l_discount: vec![10, 0, 0, 5, 0],
        }
    }

    #[test]
    fn every_table_returns_the_hand_computed_answer() {
        // Row 0: part 1 green, (1,10) cost 100: 1000*90 - 100*200 = 70000, nation 3, 1992.
        // Row 1: (1,11) cost 200: 2000*100 - 200*100 = 180000, nation 7, 1995.
        // Row 2: part 2 not green. Row 3: (3,11) cost 400: 4000*95 - 400*300 = 260000,
        // nation 7, 1995. Row 4: (3,10) not in partsupp.
        let d = tiny();
        for run in [
            q9::<JoinTable>(&d, true).expect("vip"),
            q9::<JoinTable>(&d, false).expect("test setup"),
            q9::<StdMap<u32>>(&d, false).expect("test setup"),
        ] {
            assert_eq!(run.profit_e4, 70000 + 180000 + 260000);
            assert_eq!(run.groups, 2);
            assert_eq!(run.a_matches, 3);
        }
    }

    #[test]
    fn duplicate_build_keys_are_an_error_not_a_panic() {
        let mut d = tiny();
        d.o_orderkey = vec![100, 100];
        assert!(q9::<JoinTable>(&d, true).is_err());
        assert!(q9::<StdMap<u32>>(&d, false).is_err());
    }
}
