//! YCSB core workloads A–F as streams of [`Op`], with YCSB's `CoreWorkload` semantics.
//!
//! What is reproduced (from YCSB's `site.ycsb.workloads.CoreWorkload` and its generators):
//!
//! * **Load phase**: keys `insertstart .. insertstart + recordcount` inserted in order of key
//!   number; each insert writes all fields (`fieldcount × fieldlength` bytes, default 10 × 100).
//! * **Key naming / insert order**: with `insertorder=hashed` (default) the stored key is
//!   `fnvhash64(keynum)`, otherwise `keynum`; the name is `"user"` + the decimal number
//!   left-padded with zeros to `zeropadding` digits ([`key_name`]).
//! * **Operation choice**: YCSB's `DiscreteGenerator` over read, update, insert, scan,
//!   read-modify-write proportions.
//! * **Key choice** (`requestdistribution`): `uniform` over the loaded records; `zipfian` is YCSB's
//!   *scrambled* zipfian over `recordcount + 2 · operationcount · insertproportion` items (YCSB's
//!   fudge factor for future inserts), rejecting key numbers not yet inserted; `latest` is
//!   `last - zipfian(last)` over the growing insert counter; `hotspot`, `exponential`
//!   (counted back from the last insert) and `sequential` as in YCSB.
//! * **Inserts** in the run phase take the next key number of the insert counter.
//! * **Updates and read-modify-writes** write one field (`writeallfields=false`, YCSB's default)
//!   unless `write_all_fields` is set.
//! * **Scans** start at a key chosen as above; length uniform in `[1, maxscanlength]`
//!   (workload E: 100) or zipfian if `scan_length_zipfian`.
//!
//! What differs: YCSB draws from `ThreadLocalRandom`, so its streams are not reproducible; ours
//! are a pure function of the seed. Inserts are acknowledged immediately (a single-threaded
//! client), which is what YCSB's `AcknowledgedCounterGenerator` converges to.
//!
//! Thread-safety: a [`YcsbRun`] is a single stream (`Send`); use one per client thread with
//! distinct seeds. Memory: O(1).

use std::str::FromStr;

use crate::dist::{fnvhash64, scrambled_zipf, GrayZipf, RequestDist, Zipf, ZIPFIAN_CONSTANT};
use crate::error::{check_nonzero, check_proportions, Result, WorkloadError};
use crate::op::Op;
use crate::rng::Xoshiro256;

/// YCSB default `fieldcount`.
pub const FIELD_COUNT_DEFAULT: u32 = 10;
/// YCSB default `fieldlength` in bytes.
pub const FIELD_LENGTH_DEFAULT: u32 = 100;
/// YCSB default `maxscanlength` (workload E overrides it with 100).
pub const MAX_SCAN_LENGTH_DEFAULT: u32 = 1000;

/// The six core workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreWorkload {
    /// 50% read, 50% update, zipfian.
    A,
    /// 95% read, 5% update, zipfian.
    B,
    /// 100% read, zipfian.
    C,
    /// 95% read, 5% insert, latest.
    D,
    /// 95% scan (uniform length 1..=100), 5% insert, zipfian.
    E,
    /// 50% read, 50% read-modify-write, zipfian.
    F,
}

impl FromStr for CoreWorkload {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        let t = t.strip_prefix("workload").unwrap_or(&t);
        match t {
            "a" => Ok(CoreWorkload::A),
            "b" => Ok(CoreWorkload::B),
            "c" => Ok(CoreWorkload::C),
            "d" => Ok(CoreWorkload::D),
            "e" => Ok(CoreWorkload::E),
            "f" => Ok(CoreWorkload::F),
            _ => Err(WorkloadError::UnknownName {
                kind: "YCSB workload",
                given: s.to_string(),
                valid: "a, b, c, d, e, f (or workloada .. workloadf)",
            }),
        }
    }
}

/// YCSB `insertorder`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertOrder {
    /// Stored key = `fnvhash64(keynum)` (YCSB default).
    Hashed,
    /// Stored key = `keynum`.
    Ordered,
}

/// The `CoreWorkload` properties that shape the stream.
#[derive(Clone, Debug)]
pub struct YcsbConfig {
    /// `recordcount`: records loaded before the run.
    pub record_count: u64,
    /// `operationcount`: operations in the run phase.
    pub operation_count: u64,
    /// `readproportion`.
    pub read_proportion: f64,
    /// `updateproportion`.
    pub update_proportion: f64,
    /// `insertproportion`.
    pub insert_proportion: f64,
    /// `scanproportion`.
    pub scan_proportion: f64,
    /// `readmodifywriteproportion`.
    pub rmw_proportion: f64,
    /// `requestdistribution`.
    pub request_distribution: RequestDist,
    /// `fieldcount`.
    pub field_count: u32,
    /// `fieldlength` (bytes).
    pub field_length: u32,
    /// `writeallfields`.
    pub write_all_fields: bool,
    /// `minscanlength`.
    pub min_scan_length: u32,
    /// `maxscanlength`.
    pub max_scan_length: u32,
    /// `scanlengthdistribution=zipfian` instead of uniform.
    pub scan_length_zipfian: bool,
    /// `insertorder`.
    pub insert_order: InsertOrder,
    /// `insertstart`.
    pub insert_start: u64,
    /// `zeropadding` of key names.
    pub zero_padding: u32,
    /// Seed of the stream.
    pub seed: u64,
}

impl YcsbConfig {
    /// The core workload `w` with YCSB's defaults for everything the workload file leaves unset.
    pub fn core(w: CoreWorkload, record_count: u64, operation_count: u64, seed: u64) -> Self {
        let mut c = Self {
            record_count,
            operation_count,
            read_proportion: 0.0,
            update_proportion: 0.0,
            insert_proportion: 0.0,
            scan_proportion: 0.0,
            rmw_proportion: 0.0,
            request_distribution: RequestDist::Zipfian(ZIPFIAN_CONSTANT),
            field_count: FIELD_COUNT_DEFAULT,
            field_length: FIELD_LENGTH_DEFAULT,
            write_all_fields: false,
            min_scan_length: 1,
            max_scan_length: MAX_SCAN_LENGTH_DEFAULT,
            scan_length_zipfian: false,
            insert_order: InsertOrder::Hashed,
            insert_start: 0,
            zero_padding: 1,
            seed,
        };
        match w {
            CoreWorkload::A => {
                c.read_proportion = 0.5;
                c.update_proportion = 0.5;
            }
            CoreWorkload::B => {
                c.read_proportion = 0.95;
                c.update_proportion = 0.05;
            }
            CoreWorkload::C => c.read_proportion = 1.0,
            CoreWorkload::D => {
                c.read_proportion = 0.95;
                c.insert_proportion = 0.05;
                c.request_distribution = RequestDist::Latest(ZIPFIAN_CONSTANT);
            }
            CoreWorkload::E => {
                c.scan_proportion = 0.95;
                c.insert_proportion = 0.05;
                c.max_scan_length = 100;
            }
            CoreWorkload::F => {
                c.read_proportion = 0.5;
                c.rmw_proportion = 0.5;
            }
        }
        c
    }

    /// Checks every property; called by [`YcsbConfig::load`] and [`YcsbConfig::run`].
    pub fn validate(&self) -> Result<()> {
        check_nonzero("record_count", self.record_count)?;
        check_proportions(&[
            ("read_proportion", self.read_proportion),
            ("update_proportion", self.update_proportion),
            ("insert_proportion", self.insert_proportion),
            ("scan_proportion", self.scan_proportion),
            ("rmw_proportion", self.rmw_proportion),
        ])?;
        self.request_distribution.validate()?;
        check_nonzero("field_count", u64::from(self.field_count))?;
        if self.min_scan_length == 0 || self.min_scan_length > self.max_scan_length {
            return Err(WorkloadError::InvalidParameter {
                name: "min_scan_length",
                value: self.min_scan_length.to_string(),
                reason: "must be in [1, max_scan_length]",
            });
        }
        if u64::from(self.field_count) * u64::from(self.field_length) > u64::from(u32::MAX) {
            return Err(WorkloadError::InvalidParameter {
                name: "field_length",
                value: self.field_length.to_string(),
                reason: "field_count * field_length must fit in 32 bits",
            });
        }
        let top = self
            .insert_start
            .checked_add(self.record_count)
            .and_then(|x| x.checked_add(self.operation_count))
            .filter(|&x| x < i64::MAX as u64);
        if top.is_none() {
            return Err(WorkloadError::InvalidParameter {
                name: "record_count",
                value: self.record_count.to_string(),
                reason: "insert_start + record_count + operation_count must be < 2^63",
            });
        }
        Ok(())
    }

    /// The stored key for key number `keynum` under this config's insert order.
    #[inline]
    pub fn key_of(&self, keynum: u64) -> u64 {
        match self.insert_order {
            InsertOrder::Hashed => fnvhash64(keynum),
            InsertOrder::Ordered => keynum,
        }
    }

    /// The load phase: `record_count` inserts of all fields.
    pub fn load(&self) -> Result<YcsbLoad> {
        self.validate()?;
        Ok(YcsbLoad {
            cfg: self.clone(),
            next: self.insert_start,
            end: self.insert_start + self.record_count,
        })
    }

    /// The run (transaction) phase: `operation_count` operations.
    pub fn run(&self) -> Result<YcsbRun> {
        self.validate()?;
        YcsbRun::new(self.clone())
    }
}

/// YCSB's key name for a stored key: `"user"` + decimal, zero-padded to `zero_padding` digits.
pub fn key_name(key: u64, zero_padding: u32) -> String {
    format!("user{key:0width$}", width = zero_padding as usize)
}

/// The load-phase stream.
#[derive(Clone, Debug)]
pub struct YcsbLoad {
    cfg: YcsbConfig,
    next: u64,
    end: u64,
}

impl Iterator for YcsbLoad {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        if self.next >= self.end {
            return None;
        }
        let k = self.next;
        self.next += 1;
        Some(Op::Insert {
            key: self.cfg.key_of(k),
            value_len: self.cfg.field_count * self.cfg.field_length,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Read,
    Update,
    Insert,
    Scan,
    Rmw,
}

#[derive(Clone, Debug)]
enum Chooser {
    Uniform {
        lo: u64,
        count: u64,
    },
    Scrambled {
        lo: u64,
        items: u64,
        zipf: Zipf,
    },
    Latest {
        zipf: GrayZipfOrRi,
    },
    Hotspot {
        lo: u64,
        hot: u64,
        cold: u64,
        ops: f64,
    },
    Exponential {
        gamma: f64,
    },
    Sequential {
        lo: u64,
        count: u64,
        next: u64,
    },
}

/// `latest` needs a zipfian whose item count grows; Gray's method grows incrementally, the
/// rejection-inversion one (θ >= 1) is rebuilt in O(1).
#[derive(Clone, Debug)]
enum GrayZipfOrRi {
    Gray(GrayZipf),
    Ri(f64, Zipf),
    Uniform,
}

/// The run-phase stream.
#[derive(Clone, Debug)]
pub struct YcsbRun {
    cfg: YcsbConfig,
    rng: Xoshiro256,
    left: u64,
    thresholds: Vec<(f64, Kind)>,
    chooser: Chooser,
    /// Next key number the insert counter hands out.
    next_insert: u64,
    scan_zipf: Option<Zipf>,
}

impl YcsbRun {
    fn new(cfg: YcsbConfig) -> Result<Self> {
        let mut thresholds = Vec::new();
        for (p, k) in [
            (cfg.read_proportion, Kind::Read),
            (cfg.update_proportion, Kind::Update),
            (cfg.insert_proportion, Kind::Insert),
            (cfg.scan_proportion, Kind::Scan),
            (cfg.rmw_proportion, Kind::Rmw),
        ] {
            if p > 0.0 {
                thresholds.push((p, k));
            }
        }
        let sum: f64 = thresholds.iter().map(|t| t.0).sum();
        for t in &mut thresholds {
            t.0 /= sum;
        }
        let lo = cfg.insert_start;
        let count = cfg.record_count;
        let chooser = match cfg.request_distribution {
            RequestDist::Uniform => Chooser::Uniform { lo, count },
            RequestDist::Zipfian(t)
            | RequestDist::ScrambledZipfian(t)
            | RequestDist::ZipfianRejectionInversion(t) => {
                // YCSB: expectednewkeys = opcount * insertproportion * 2 (fudge factor).
                let new_keys = (cfg.operation_count as f64 * cfg.insert_proportion * 2.0) as u64;
                Chooser::Scrambled {
                    lo,
                    items: count + new_keys + 1,
                    zipf: scrambled_zipf(t)?,
                }
            }
            RequestDist::Latest(t) => {
                let last = lo + count - 1;
                let zipf = if t == 0.0 {
                    GrayZipfOrRi::Uniform
                } else if t < 1.0 {
                    GrayZipfOrRi::Gray(GrayZipf::new(last.max(1), t)?)
                } else {
                    GrayZipfOrRi::Ri(t, Zipf::new(last.max(1), t)?)
                };
                Chooser::Latest { zipf }
            }
            RequestDist::Hotspot {
                data_fraction,
                ops_fraction,
            } => {
                let hot = ((count as f64 * data_fraction) as u64).min(count);
                Chooser::Hotspot {
                    lo,
                    hot,
                    cold: count - hot,
                    ops: ops_fraction,
                }
            }
            RequestDist::Exponential { percentile, frac } => Chooser::Exponential {
                gamma: -(1.0 - percentile / 100.0).ln() / (count as f64 * frac),
            },
            RequestDist::Sequential => Chooser::Sequential { lo, count, next: 0 },
        };
        let scan_zipf = if cfg.scan_length_zipfian {
            let span = u64::from(cfg.max_scan_length - cfg.min_scan_length) + 1;
            Some(Zipf::new(span, ZIPFIAN_CONSTANT)?)
        } else {
            None
        };
        Ok(Self {
            rng: Xoshiro256::new(cfg.seed, 0x1c5b),
            left: cfg.operation_count,
            thresholds,
            chooser,
            next_insert: lo + count,
            scan_zipf,
            cfg,
        })
    }

    /// Highest key number inserted so far (YCSB's `transactioninsertkeysequence.lastValue()`).
    fn last_inserted(&self) -> u64 {
        self.next_insert - 1
    }

    fn choose_kind(&mut self) -> Kind {
        // YCSB's DiscreteGenerator: walk the (pre-normalised) weights with one uniform draw.
        let mut val = self.rng.next_f64();
        for &(share, k) in &self.thresholds {
            if val < share {
                return k;
            }
            val -= share;
        }
        self.thresholds.last().map_or(Kind::Read, |t| t.1)
    }

    /// YCSB's `nextKeynum`.
    fn next_keynum(&mut self) -> u64 {
        let last = self.last_inserted();
        let rng = &mut self.rng;
        match &mut self.chooser {
            Chooser::Uniform { lo, count } => *lo + rng.below(*count),
            Chooser::Scrambled { lo, items, zipf } => {
                // Reject key numbers beyond the last insert (bounded: the loaded records make
                // acceptance likely; after 1000 tries fall back to the last insert).
                for _ in 0..1000 {
                    let k = *lo + fnvhash64(zipf.sample(rng)) % *items;
                    if k <= last {
                        return k;
                    }
                }
                last
            }
            Chooser::Latest { zipf } => {
                // SkewedLatestGenerator: max - zipfian.nextLong(max).
                let max = last;
                if max == 0 {
                    return 0;
                }
                let off = match zipf {
                    GrayZipfOrRi::Gray(g) => {
                        g.grow_to(max);
                        g.sample(rng)
                    }
                    GrayZipfOrRi::Ri(t, z) => {
                        if let Zipf::RejectionInversion(r) = z {
                            if r.items() != max {
                                if let Ok(nz) = Zipf::new(max, *t) {
                                    *z = nz;
                                }
                            }
                        }
                        z.sample(rng)
                    }
                    GrayZipfOrRi::Uniform => rng.below(max),
                };
                max - off.min(max)
            }
            Chooser::Hotspot { lo, hot, cold, ops } => {
                let to_hot = rng.next_f64() < *ops;
                if (to_hot && *hot > 0) || *cold == 0 {
                    *lo + rng.below(*hot)
                } else {
                    *lo + *hot + rng.below(*cold)
                }
            }
            Chooser::Exponential { gamma } => {
                for _ in 0..1024 {
                    let x = (-rng.next_f64_open0().ln() / *gamma) as u64;
                    if x <= last {
                        return last - x;
                    }
                }
                last
            }
            Chooser::Sequential { lo, count, next } => {
                let v = *next;
                *next = (v + 1) % *count;
                *lo + v
            }
        }
    }

    /// The stored key of the next chosen key number.
    fn next_key(&mut self) -> u64 {
        let k = self.next_keynum();
        self.cfg.key_of(k)
    }

    fn write_len(&self) -> u32 {
        if self.cfg.write_all_fields {
            self.cfg.field_count * self.cfg.field_length
        } else {
            self.cfg.field_length
        }
    }
}

impl Iterator for YcsbRun {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let op = match self.choose_kind() {
            Kind::Read => Op::Read {
                key: self.next_key(),
            },
            Kind::Update => Op::Update {
                key: self.next_key(),
                value_len: self.write_len(),
            },
            Kind::Rmw => Op::ReadModifyWrite {
                key: self.next_key(),
                value_len: self.write_len(),
            },
            Kind::Insert => {
                let k = self.next_insert;
                self.next_insert += 1;
                Op::Insert {
                    key: self.cfg.key_of(k),
                    value_len: self.cfg.field_count * self.cfg.field_length,
                }
            }
            Kind::Scan => {
                let start = self.next_key();
                let min = self.cfg.min_scan_length;
                let span = u64::from(self.cfg.max_scan_length - min) + 1;
                let off = match &self.scan_zipf {
                    Some(z) => z.sample(&mut self.rng),
                    None => self.rng.below(span),
                };
                Op::Scan {
                    start,
                    len: min + off as u32,
                }
            }
        };
        Some(op)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let r = usize::try_from(self.left).unwrap_or(usize::MAX);
        (r, Some(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn mix(w: CoreWorkload, ops: u64) -> HashMap<&'static str, f64> {
        let cfg = YcsbConfig::core(w, 10_000, ops, 42);
        let mut m: HashMap<&'static str, f64> = HashMap::new();
        for op in cfg.run().unwrap() {
            *m.entry(op.name()).or_default() += 1.0 / ops as f64;
        }
        m
    }

    fn near(m: &HashMap<&str, f64>, k: &str, want: f64) {
        let got = m.get(k).copied().unwrap_or(0.0);
        assert!((got - want).abs() < 0.01, "{k}: {got} vs {want}");
    }

    #[test]
    fn core_workload_mixes_match_ycsb() {
        println!("seed 42");
        let n = 100_000;
        let a = mix(CoreWorkload::A, n);
        near(&a, "read", 0.5);
        near(&a, "update", 0.5);
        let b = mix(CoreWorkload::B, n);
        near(&b, "read", 0.95);
        near(&b, "update", 0.05);
        let c = mix(CoreWorkload::C, n);
        near(&c, "read", 1.0);
        let d = mix(CoreWorkload::D, n);
        near(&d, "read", 0.95);
        near(&d, "insert", 0.05);
        let e = mix(CoreWorkload::E, n);
        near(&e, "scan", 0.95);
        near(&e, "insert", 0.05);
        let f = mix(CoreWorkload::F, n);
        near(&f, "read", 0.5);
        near(&f, "rmw", 0.5);
    }

    #[test]
    fn workload_e_scan_lengths_are_uniform_1_to_100() {
        let cfg = YcsbConfig::core(CoreWorkload::E, 1000, 200_000, 7);
        let mut hist = [0u64; 101];
        for op in cfg.run().unwrap() {
            if let Op::Scan { len, .. } = op {
                assert!((1..=100).contains(&len));
                hist[len as usize] += 1;
            }
        }
        let total: u64 = hist.iter().sum();
        let expect = total as f64 / 100.0;
        for (l, &h) in hist.iter().enumerate().skip(1) {
            assert!(
                (h as f64 - expect).abs() < 5.0 * expect.sqrt(),
                "len {l}: {h} vs {expect}"
            );
        }
        let mean = hist
            .iter()
            .enumerate()
            .map(|(l, &h)| l as f64 * h as f64)
            .sum::<f64>()
            / total as f64;
        assert!((mean - 50.5).abs() < 0.5, "{mean}");
    }

    #[test]
    fn load_phase_inserts_every_record_once_with_full_values() {
        let cfg = YcsbConfig::core(CoreWorkload::A, 5000, 0, 1);
        let ops: Vec<Op> = cfg.load().unwrap().collect();
        assert_eq!(ops.len(), 5000);
        let mut keys: Vec<u64> = ops.iter().map(|o| o.key()).collect();
        assert!(ops.iter().all(|o| matches!(
            o,
            Op::Insert {
                value_len: 1000,
                ..
            }
        )));
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 5000);
        assert_eq!(ops[3].key(), fnvhash64(3));
    }

    #[test]
    fn reads_and_updates_only_touch_loaded_or_inserted_keys() {
        for w in [CoreWorkload::A, CoreWorkload::D, CoreWorkload::E] {
            let mut cfg = YcsbConfig::core(w, 2000, 50_000, 3);
            cfg.insert_order = InsertOrder::Ordered;
            let mut max_inserted = 1999u64;
            for op in cfg.run().unwrap() {
                match op {
                    Op::Insert { key, .. } => {
                        assert_eq!(key, max_inserted + 1);
                        max_inserted = key;
                    }
                    other => assert!(other.key() <= max_inserted, "{w:?}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn updates_write_one_field_unless_write_all_fields() {
        let mut cfg = YcsbConfig::core(CoreWorkload::A, 100, 1000, 3);
        assert!(cfg.run().unwrap().all(|o| match o {
            Op::Update { value_len, .. } => value_len == 100,
            _ => true,
        }));
        cfg.write_all_fields = true;
        cfg.field_length = 64;
        assert!(cfg.run().unwrap().all(|o| match o {
            Op::Update { value_len, .. } => value_len == 640,
            _ => true,
        }));
    }

    #[test]
    fn workload_d_reads_favour_recent_inserts() {
        let mut cfg = YcsbConfig::core(CoreWorkload::D, 10_000, 100_000, 3);
        cfg.insert_order = InsertOrder::Ordered;
        let mut last = 9_999u64;
        let mut near_latest = 0u64;
        let mut reads = 0u64;
        for op in cfg.run().unwrap() {
            match op {
                Op::Insert { key, .. } => last = key,
                Op::Read { key } => {
                    reads += 1;
                    if last - key < 100 {
                        near_latest += 1;
                    }
                }
                _ => {}
            }
        }
        // Zipfian 0.99 over ~10^4 items puts well over half the mass on the 100 newest.
        assert!(near_latest as f64 / reads as f64 > 0.5);
    }

    #[test]
    fn zipfian_requests_are_skewed_but_scattered() {
        let mut cfg = YcsbConfig::core(CoreWorkload::C, 10_000, 200_000, 3);
        cfg.insert_order = InsertOrder::Ordered;
        let mut counts = vec![0u64; 10_000];
        for op in cfg.run().unwrap() {
            counts[op.key() as usize] += 1;
        }
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let top1pct: u64 = sorted[..100].iter().sum();
        assert!(top1pct as f64 / 200_000.0 > 0.15);
        let hottest = counts.iter().enumerate().max_by_key(|p| p.1).unwrap().0 as u64;
        assert_eq!(hottest, fnvhash64(0) % 10_001);
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let a: Vec<Op> = YcsbConfig::core(CoreWorkload::A, 100, 500, 1)
            .run()
            .unwrap()
            .collect();
        let b: Vec<Op> = YcsbConfig::core(CoreWorkload::A, 100, 500, 1)
            .run()
            .unwrap()
            .collect();
        let c: Vec<Op> = YcsbConfig::core(CoreWorkload::A, 100, 500, 2)
            .run()
            .unwrap()
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn bad_configs_are_rejected_before_work() {
        let mut cfg = YcsbConfig::core(CoreWorkload::A, 100, 100, 1);
        cfg.read_proportion = 0.6;
        assert!(matches!(
            cfg.run().unwrap_err(),
            WorkloadError::ProportionsDoNotSumToOne { .. }
        ));
        let cfg = YcsbConfig::core(CoreWorkload::A, 0, 100, 1);
        assert!(matches!(
            cfg.load().unwrap_err(),
            WorkloadError::Empty { .. }
        ));
        let mut cfg = YcsbConfig::core(CoreWorkload::E, 100, 100, 1);
        cfg.min_scan_length = 200;
        assert!(cfg.run().is_err());
        let e = "g".parse::<CoreWorkload>().unwrap_err().to_string();
        assert!(e.contains("a, b, c"), "{e}");
        assert_eq!(
            "workloadB".parse::<CoreWorkload>().unwrap(),
            CoreWorkload::B
        );
    }

    #[test]
    fn key_names_follow_ycsb() {
        assert_eq!(key_name(42, 1), "user42");
        assert_eq!(key_name(42, 5), "user00042");
    }
}
