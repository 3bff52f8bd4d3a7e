//! Persisted statistics of the cost-benefit analyzer (magic `ATAS`, version 3), so that a
//! reopened database judges its files from what it learned before instead of going back to the
//! always-learn bootstrap. Byte-level spec: docs/formats/learned-model.md "Analyzer state".
//!
//! ```text
//! header  := magic[4]="ATAS" version:u16 levels:u16 buckets:u16 reserved:u16=0   (12 bytes)
//! train   := train_ns:f64 train_records:f64                                     (16 bytes)
//! calib   := predicted_ns:f64 realized_ns:f64        (16 bytes; version 2 only; absent in 1)
//! level   := level:u16 files:f64 size_bytes:f64 counts:f64[4] timed:f64[4] nanos:f64[4]
//!            life_files:f64[buckets] life_ns:f64[buckets]
//!            trained:f64 useless:f64                      (version 3 only; absent before)
//! trailer := crc32c:u32 over every byte before it
//! ```
//!
//! All integers little-endian; `f64` as IEEE-754 bits, little-endian. Only levels with retired
//! files are written, in increasing level order. Version 2 added the calibration sums
//! ([`Analyzer::calibration`]); a version-1 state is read with them at zero. Version 3 added
//! each level's learnability counts ([`Analyzer::unlearnable`]); an older state is read with
//! them at zero (every level learnable).
//!
//! The state is a cache of statistics: what it holds only steers which files get learned, never
//! what a lookup returns. The decoder treats its input as untrusted: it checks the exact length
//! the header announces before reading, the checksum, then that levels are in range and strictly
//! increasing and that every number is finite and non-negative. Any failure is a
//! [`LearnError`] for which [`LearnError::is_corruption`] holds, and leaves the analyzer as it
//! was.
//!
//! Thread-safety: the methods take the analyzer's internal mutex once.

use crate::analyzer::{Analyzer, LevelStats, LEVELS_MAX, LIFE_BUCKETS};
use crate::error::{LearnError, Result};

/// Magic of the analyzer state.
pub const STATE_MAGIC: [u8; 4] = *b"ATAS";
/// Format version this build writes (it also reads version 1).
pub const STATE_VERSION: u16 = 3;
const HEADER_LEN: usize = 12;
const TRAIN_LEN: usize = 16;
const CALIB_LEN: usize = 16;

/// Bytes between the header and the first level record in `version`.
fn head_len(version: u16) -> usize {
    if version >= 2 {
        TRAIN_LEN + CALIB_LEN
    } else {
        TRAIN_LEN
    }
}
/// `f64`s per level record after its `level:u16` in `version`.
fn level_f64s(version: u16) -> usize {
    let learnability = if version >= 3 { 2 } else { 0 };
    2 + 12 + 2 * LIFE_BUCKETS + learnability
}

/// Bytes of one level record in `version`.
fn level_len(version: u16) -> usize {
    2 + 8 * level_f64s(version)
}

impl Analyzer {
    /// The level statistics and the measured training cost, encoded (see the module doc).
    pub fn encode_state(&self) -> Vec<u8> {
        let g = self.lock();
        let levels: Vec<(usize, &LevelStats)> = g
            .levels
            .iter()
            .enumerate()
            .filter(|(_, lv)| lv.files > 0.0)
            .collect();
        let len = HEADER_LEN + head_len(STATE_VERSION) + levels.len() * level_len(STATE_VERSION);
        let mut out = Vec::with_capacity(len + 4);
        out.extend_from_slice(&STATE_MAGIC);
        out.extend_from_slice(&STATE_VERSION.to_le_bytes());
        out.extend_from_slice(&(levels.len() as u16).to_le_bytes());
        out.extend_from_slice(&(LIFE_BUCKETS as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        for v in [
            g.train_ns,
            g.train_records,
            g.calib_predicted_ns,
            g.calib_realized_ns,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for (level, lv) in levels {
            out.extend_from_slice(&(level as u16).to_le_bytes());
            let fields = [lv.files, lv.size_bytes].into_iter();
            let sums = lv.counts.iter().chain(&lv.timed).chain(&lv.nanos);
            let lives = lv.life_files.iter().chain(&lv.life_ns);
            let learnability = [lv.trained, lv.useless].into_iter();
            for v in fields
                .chain(sums.copied())
                .chain(lives.copied())
                .chain(learnability)
            {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Replaces the level statistics and the training cost with the ones `buf` holds (written
    /// by [`Analyzer::encode_state`]). On any error the analyzer is left unchanged.
    pub fn restore_state(&self, buf: &[u8]) -> Result<()> {
        let d = decode(buf)?;
        let mut g = self.lock();
        g.train_ns = d.train_ns;
        g.train_records = d.train_records;
        (g.calib_predicted_ns, g.calib_realized_ns) = d.calib;
        let levels = d.levels;
        for (i, lv) in g.levels.iter_mut().enumerate() {
            *lv = levels
                .iter()
                .find(|(l, _)| *l == i)
                .map(|(_, s)| s.clone())
                .unwrap_or_default();
        }
        Ok(())
    }
}

fn corrupt(offset: usize, reason: &'static str) -> LearnError {
    LearnError::Corrupt { offset, reason }
}

struct Decoded {
    train_ns: f64,
    train_records: f64,
    /// (predicted, realized) calibration sums; zero in a version-1 state.
    calib: (f64, f64),
    levels: Vec<(usize, LevelStats)>,
}

fn decode(buf: &[u8]) -> Result<Decoded> {
    let need = |offset: usize, needed: usize| LearnError::Truncated {
        offset,
        needed,
        available: buf.len().saturating_sub(offset),
    };
    if buf.len() < HEADER_LEN + TRAIN_LEN + 4 {
        return Err(need(0, HEADER_LEN + TRAIN_LEN + 4));
    }
    if buf[..4] != STATE_MAGIC {
        return Err(corrupt(0, "not an analyzer state (bad magic)"));
    }
    let u16_at = |o: usize| u16::from_le_bytes([buf[o], buf[o + 1]]);
    let version = u16_at(4);
    if !(1..=STATE_VERSION).contains(&version) {
        return Err(LearnError::UnsupportedVersion {
            found: version,
            supported: STATE_VERSION,
        });
    }
    let count = usize::from(u16_at(6));
    if usize::from(u16_at(8)) != LIFE_BUCKETS {
        return Err(corrupt(
            8,
            "lifetime bucket count differs from this build's",
        ));
    }
    if count > LEVELS_MAX {
        return Err(corrupt(6, "more levels than the analyzer tracks"));
    }
    let head = head_len(version);
    let total = HEADER_LEN + head + count * level_len(version) + 4;
    if buf.len() != total {
        return Err(if buf.len() < total {
            need(0, total)
        } else {
            corrupt(total, "bytes after the trailer")
        });
    }
    let body = &buf[..total - 4];
    let stored = u32::from_le_bytes([
        buf[total - 4],
        buf[total - 3],
        buf[total - 2],
        buf[total - 1],
    ]);
    let computed = crc32c::crc32c(body);
    if stored != computed {
        return Err(LearnError::ChecksumMismatch { stored, computed });
    }
    let f64_at = |o: usize| -> Result<f64> {
        let mut b = [0u8; 8];
        b.copy_from_slice(&buf[o..o + 8]);
        let v = f64::from_le_bytes(b);
        if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(corrupt(o, "a statistic is negative or not finite"))
        }
    };
    let train_ns = f64_at(HEADER_LEN)?;
    let train_records = f64_at(HEADER_LEN + 8)?;
    let calib = if version >= 2 {
        (
            f64_at(HEADER_LEN + TRAIN_LEN)?,
            f64_at(HEADER_LEN + TRAIN_LEN + 8)?,
        )
    } else {
        (0.0, 0.0)
    };
    let mut levels: Vec<(usize, LevelStats)> = Vec::with_capacity(count);
    for i in 0..count {
        let at = HEADER_LEN + head + i * level_len(version);
        let level = usize::from(u16_at(at));
        if level >= LEVELS_MAX {
            return Err(corrupt(at, "level beyond the analyzer's range"));
        }
        if levels.last().is_some_and(|(l, _)| *l >= level) {
            return Err(corrupt(at, "levels not strictly increasing"));
        }
        // Fields a version does not have stay zero.
        let mut v = [0.0f64; 2 + 12 + 2 * LIFE_BUCKETS + 2];
        for (j, slot) in v.iter_mut().take(level_f64s(version)).enumerate() {
            *slot = f64_at(at + 2 + 8 * j)?;
        }
        let mut lv = LevelStats {
            files: v[0],
            size_bytes: v[1],
            ..LevelStats::default()
        };
        lv.counts.copy_from_slice(&v[2..6]);
        lv.timed.copy_from_slice(&v[6..10]);
        lv.nanos.copy_from_slice(&v[10..14]);
        lv.life_files.copy_from_slice(&v[14..14 + LIFE_BUCKETS]);
        lv.life_ns
            .copy_from_slice(&v[14 + LIFE_BUCKETS..14 + 2 * LIFE_BUCKETS]);
        lv.trained = v[14 + 2 * LIFE_BUCKETS];
        lv.useless = v[15 + 2 * LIFE_BUCKETS];
        if lv.useless > lv.trained {
            // More useless models than trainings: not something the encoder writes.
            return Err(corrupt(
                at + 2 + 8 * (15 + 2 * LIFE_BUCKETS),
                "more useless models than trained tables",
            ));
        }
        levels.push((level, lv));
    }
    Ok(Decoded {
        train_ns,
        train_records,
        calib,
        levels,
    })
}

#[cfg(test)]
mod tests {
    use crate::analyzer::{Analyzer, AnalyzerConfig, LookupPath, LookupResult};

    const MS: u64 = 1_000_000;

    /// An analyzer with statistics at levels 1 and 3 and a measured training cost.
    fn trained() -> Analyzer {
        let a = Analyzer::new(AnalyzerConfig::default()).unwrap();
        for (id, level, life) in [(1, 1, 150), (2, 1, 170), (3, 3, 9000)] {
            let f = a.register(id, level, 1 << 20, 9000, 0).unwrap();
            f.record(LookupResult::Positive, LookupPath::Baseline, 1500);
            f.record(LookupResult::Negative, LookupPath::Model, 400);
            if id == 3 {
                a.learned(&f, 700_000);
            }
            a.retire(id, life * MS);
        }
        a
    }

    #[test]
    fn state_round_trips_through_a_fresh_analyzer() {
        let a = trained();
        let bytes = a.encode_state();
        let b = Analyzer::new(AnalyzerConfig::default()).unwrap();
        b.restore_state(&bytes).unwrap();
        assert_eq!(b.level_summaries(), a.level_summaries());
        assert_eq!(b.train_ns_per_record(), a.train_ns_per_record());
        assert_eq!(b.encode_state(), bytes);
    }

    #[test]
    fn calibration_round_trips_and_a_version_1_state_is_read_without_it() {
        let on = || {
            Analyzer::new(AnalyzerConfig {
                calibrate: true,
                ..AnalyzerConfig::default()
            })
            .unwrap()
        };
        let a = on();
        a.restore_state(&trained().encode_state()).unwrap();
        {
            let mut g = a.lock();
            g.calib_predicted_ns = 40e6;
            g.calib_realized_ns = 10e6;
        }
        let k = a.calibration();
        assert!(k < 1.0);
        let bytes = a.encode_state();
        let b = on();
        b.restore_state(&bytes).unwrap();
        assert_eq!(b.calibration(), k);
        // The same state as version 1 wrote it: no calibration sums.
        let c = on();
        c.restore_state(&older(&bytes, 1)).unwrap();
        assert_eq!(c.level_summaries(), a.level_summaries());
        assert_eq!(c.calibration(), 1.0);
        // An unknown later version is refused.
        let mut v4 = bytes.clone();
        v4[4..6].copy_from_slice(&4u16.to_le_bytes());
        assert!(c.restore_state(&v4).is_err());
    }

    /// `bytes` (a current state) as `version` would have written it: without the calibration
    /// sums before version 2, without the learnability counts before version 3.
    fn older(bytes: &[u8], version: u16) -> Vec<u8> {
        let count = usize::from(u16::from_le_bytes([bytes[6], bytes[7]]));
        let mut out = bytes[..12 + 16].to_vec();
        out[4..6].copy_from_slice(&version.to_le_bytes());
        if version >= 2 {
            out.extend_from_slice(&bytes[12 + 16..12 + 32]);
        }
        for i in 0..count {
            let at = 12 + 32 + i * super::level_len(super::STATE_VERSION);
            out.extend_from_slice(&bytes[at..at + super::level_len(version)]);
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    #[test]
    fn learnability_round_trips_and_a_version_2_state_is_read_without_it() {
        let a = trained();
        let f = a.register(9, 1, 1 << 20, 9000, 0).unwrap();
        for _ in 0..3 {
            a.learned(&f, 100_000);
        }
        a.unlearnable(&f);
        let l = a.learnability();
        assert_eq!(
            l.iter().find(|(lv, _)| *lv == 1).map(|x| x.1),
            Some(4.0 / 5.0)
        );
        let bytes = a.encode_state();
        let b = Analyzer::new(AnalyzerConfig::default()).unwrap();
        b.restore_state(&bytes).unwrap();
        assert_eq!(b.learnability(), l);
        let c = Analyzer::new(AnalyzerConfig::default()).unwrap();
        c.restore_state(&older(&bytes, 2)).unwrap();
        assert_eq!(c.level_summaries(), a.level_summaries());
        assert!(c.learnability().is_empty(), "{:?}", c.learnability());
    }

    #[test]
    fn every_bit_flip_and_truncation_is_an_error_and_changes_nothing() {
        let bytes = trained().encode_state();
        let b = Analyzer::new(AnalyzerConfig::default()).unwrap();
        let empty = b.encode_state();
        for i in 0..bytes.len() * 8 {
            let mut bad = bytes.clone();
            bad[i / 8] ^= 1 << (i % 8);
            let e = b.restore_state(&bad).unwrap_err();
            assert!(e.is_corruption(), "bit {i}: {e}");
        }
        for n in 0..bytes.len() {
            let e = b.restore_state(&bytes[..n]).unwrap_err();
            assert!(e.is_corruption(), "length {n}: {e}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(b.restore_state(&long).unwrap_err().is_corruption());
        assert_eq!(b.encode_state(), empty);
    }

    #[test]
    fn checksummed_nonsense_is_refused() {
        let mut bytes = trained().encode_state();
        // A negative file count behind a valid checksum.
        let at = 12 + 32 + 2;
        bytes[at..at + 8].copy_from_slice(&(-1.0f64).to_le_bytes());
        let n = bytes.len() - 4;
        let crc = crc32c::crc32c(&bytes[..n]);
        bytes[n..].copy_from_slice(&crc.to_le_bytes());
        let b = Analyzer::new(AnalyzerConfig::default()).unwrap();
        let e = b.restore_state(&bytes).unwrap_err();
        assert!(e.to_string().contains("negative or not finite"), "{e}");
    }
}
