//! Persisted form of a [`LearnedIndex`] (magic `ATLM`, version 1), so that a reopened database
//! needs no relearning. Byte-level spec with a worked example: docs/formats/learned-model.md.
//!
//! ```text
//! header   := magic[4]="ATLM" version:u16 kind:u8 flags:u8 delta:u32 prefix_len:u32
//!             keys:u64 distinct:u64 max_run:u64 segment_count:u64 mean_window:f64   (56 bytes)
//! prefix   := u8[prefix_len]
//! radix    := count:u8 set[count]      only if flags has FLAG_RADIX (version 2)
//! set      := u64[4]                   256-bit membership set of one key position
//! segment  := first_key:u64 first_pos:u64 slope:f64                 kind 1, cone   (24 bytes)
//!           | first_key:u64 first_pos:u64 slope:f64 intercept:f64   kind 2, pivot  (32 bytes)
//! trailer  := crc32c:u32 over every byte before it
//! ```
//!
//! All integers little-endian; `f64` as its IEEE-754 bits, little-endian.
//!
//! The decoder treats its input as untrusted: it never panics, checks the total length the header
//! announces against the bytes given (with checked arithmetic) *before* allocating anything, so
//! no length field can make it allocate more than the input's size, verifies the checksum, then
//! validates every invariant [`PlrModel::predict`] relies on (segments strictly increasing by key,
//! positions non-decreasing and within the file, finite non-negative slopes, ...). Every failure
//! is a [`LearnError`] for which [`LearnError::is_corruption`] holds.
//!
//! Thread-safety: pure functions.

use crate::error::{LearnError, Result};
use crate::index::LearnedIndex;
use crate::keymap::{KeyMapper, RadixAlphabet, PREFIX_LEN_MAX};
use crate::plr::{PlrFit, PlrModel, Quality, Segment, DELTA_MAX};

/// File magic.
pub const MAGIC: [u8; 4] = *b"ATLM";
/// Newest format version written and read by this build: 2 adds the radix key mapping. Models
/// without it are still written as version 1, which every reader understands.
pub const FORMAT_VERSION: u16 = 2;
/// Model kind: Greedy-PLR, cone fit (intercept = first_pos, not stored).
pub const KIND_PLR_CONE: u8 = 1;
/// Model kind: Greedy-PLR, pivot fit (intercept stored).
pub const KIND_PLR_PIVOT: u8 = 2;
/// Flag bit: some mapped key repeats (windows use a second prediction).
pub const FLAG_DUP_RUNS: u8 = 1;
/// Flag bit: the key mapper uses per-position alphabets (a radix section follows the prefix).
pub const FLAG_RADIX: u8 = 2;
/// Header length in bytes.
pub const HEADER_LEN: usize = 56;
/// Bytes per segment of kind 1 (cone).
pub const SEGMENT_LEN_CONE: usize = 24;
/// Bytes per segment of kind 2 (pivot).
pub const SEGMENT_LEN_PIVOT: usize = 32;

fn segment_len(fit: PlrFit) -> usize {
    match fit {
        PlrFit::Cone => SEGMENT_LEN_CONE,
        PlrFit::Pivot => SEGMENT_LEN_PIVOT,
    }
}
/// Trailer (checksum) length.
pub const TRAILER_LEN: usize = 4;

impl LearnedIndex {
    /// Exact length of [`encode`](Self::encode)'s output.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN
            + self.mapper().prefix().len()
            + self.mapper().radix().map_or(0, |r| 1 + 32 * r.sets().len())
            + self.model().segment_count() * segment_len(self.model().fit())
            + TRAILER_LEN
    }

    /// Appends the persisted form to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.reserve(self.encoded_len());
        let m = self.model();
        let q = m.quality();
        let prefix = self.mapper().prefix();
        let radix = self.mapper().radix();
        out.extend_from_slice(&MAGIC);
        let version: u16 = if radix.is_some() { 2 } else { 1 };
        out.extend_from_slice(&version.to_le_bytes());
        out.push(match m.fit() {
            PlrFit::Cone => KIND_PLR_CONE,
            PlrFit::Pivot => KIND_PLR_PIVOT,
        });
        let mut flags = if m.has_duplicate_runs() {
            FLAG_DUP_RUNS
        } else {
            0
        };
        if radix.is_some() {
            flags |= FLAG_RADIX;
        }
        out.push(flags);
        out.extend_from_slice(&m.delta().to_le_bytes());
        // The mapper caps prefixes at PREFIX_LEN_MAX (64 KiB), so this fits in u32.
        out.extend_from_slice(&(prefix.len() as u32).to_le_bytes());
        out.extend_from_slice(&m.len().to_le_bytes());
        out.extend_from_slice(&q.distinct_keys.to_le_bytes());
        out.extend_from_slice(&q.max_run.to_le_bytes());
        out.extend_from_slice(&(m.segment_count() as u64).to_le_bytes());
        out.extend_from_slice(&q.mean_window.to_bits().to_le_bytes());
        out.extend_from_slice(prefix);
        if let Some(r) = radix {
            // At most RADIX_POSITIONS_MAX (24) positions: fits in a byte.
            out.push(r.sets().len() as u8);
            for set in r.sets() {
                for w in set {
                    out.extend_from_slice(&w.to_le_bytes());
                }
            }
        }
        for s in m.segments() {
            out.extend_from_slice(&s.first_key.to_le_bytes());
            out.extend_from_slice(&s.first_pos.to_le_bytes());
            out.extend_from_slice(&s.slope.to_bits().to_le_bytes());
            if m.fit() == PlrFit::Pivot {
                out.extend_from_slice(&s.intercept.to_bits().to_le_bytes());
            }
        }
        let crc = crc32c::crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }

    /// The persisted form as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut v);
        v
    }

    /// Decodes [`encode`](Self::encode)'s output. `buf` must be exactly one encoded index.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        let mut r = Reader { buf, pos: 0 };
        let magic = r.take(4)?;
        if magic != MAGIC {
            return Err(corrupt(0, "bad magic (expected ATLM)"));
        }
        let version = r.u16()?;
        if !(1..=FORMAT_VERSION).contains(&version) {
            return Err(LearnError::UnsupportedVersion {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let kind = r.u8()?;
        let fit = match kind {
            KIND_PLR_CONE => PlrFit::Cone,
            KIND_PLR_PIVOT => PlrFit::Pivot,
            _ => return Err(corrupt(6, "unknown model kind")),
        };
        let flags = r.u8()?;
        let delta = r.u32()?;
        let prefix_len = r.u32()? as usize;
        let keys = r.u64()?;
        let distinct = r.u64()?;
        let max_run = r.u64()?;
        let seg_count = r.u64()?;
        let mean_window = f64::from_bits(r.u64()?);
        let radix_flag = flags & FLAG_RADIX != 0;
        let radix_count = if radix_flag {
            match HEADER_LEN
                .checked_add(prefix_len)
                .and_then(|at| buf.get(at))
            {
                Some(&c) => usize::from(c),
                None => {
                    return Err(LearnError::Truncated {
                        offset: buf.len(),
                        needed: 1,
                        available: 0,
                    })
                }
            }
        } else {
            0
        };
        let radix_bytes = if radix_flag { 1 + 32 * radix_count } else { 0 };

        // Length check before any allocation or checksum: the header must announce exactly the
        // bytes given.
        let total = usize::try_from(seg_count)
            .ok()
            .and_then(|s| s.checked_mul(segment_len(fit)))
            .and_then(|s| s.checked_add(prefix_len))
            .and_then(|s| s.checked_add(radix_bytes))
            .and_then(|s| s.checked_add(HEADER_LEN + TRAILER_LEN));
        match total {
            Some(t) if t == buf.len() => {}
            Some(t) if t > buf.len() => {
                return Err(LearnError::Truncated {
                    offset: buf.len(),
                    needed: t - buf.len(),
                    available: 0,
                })
            }
            Some(t) => return Err(corrupt(t, "bytes after the checksum")),
            None => return Err(corrupt(40, "segment count overflows")),
        }
        let body_len = buf.len() - TRAILER_LEN;
        let (body, trailer) = buf.split_at(body_len);
        let mut crc_bytes = [0u8; 4];
        crc_bytes.copy_from_slice(trailer);
        let stored = u32::from_le_bytes(crc_bytes);
        let computed = crc32c::crc32c(body);
        if stored != computed {
            return Err(LearnError::ChecksumMismatch { stored, computed });
        }

        // Structural validation behind a good checksum (a buggy or hostile writer).
        if flags & !(FLAG_DUP_RUNS | FLAG_RADIX) != 0 || (radix_flag && version < 2) {
            return Err(corrupt(7, "unknown flags"));
        }
        if delta == 0 || delta > DELTA_MAX {
            return Err(corrupt(8, "delta outside 1..=2^20"));
        }
        if prefix_len > PREFIX_LEN_MAX {
            return Err(corrupt(12, "prefix longer than 64 KiB"));
        }
        if distinct > keys || max_run > keys || (keys > 0 && (distinct == 0 || max_run == 0)) {
            return Err(corrupt(16, "key counts inconsistent"));
        }
        let has_dup_runs = flags & FLAG_DUP_RUNS != 0;
        if has_dup_runs != (max_run > 1) {
            return Err(corrupt(7, "duplicate-run flag disagrees with max_run"));
        }
        // Each distinct key yields at most two training points, each at most one segment.
        if (keys == 0) != (seg_count == 0) || seg_count > distinct.saturating_mul(2) {
            return Err(corrupt(40, "segment count inconsistent with key counts"));
        }
        if !(mean_window.is_finite() && mean_window >= 0.0) {
            return Err(corrupt(48, "mean window not a finite non-negative number"));
        }

        let prefix = r.take(prefix_len)?;
        let radix = if radix_flag {
            let at = r.pos;
            let count = usize::from(r.u8()?);
            let mut sets = Vec::with_capacity(count);
            for _ in 0..count {
                sets.push([r.u64()?, r.u64()?, r.u64()?, r.u64()?]);
            }
            match RadixAlphabet::from_sets(&sets) {
                Some(a) if a.sets().len() == count => Some(a),
                _ => return Err(corrupt(at, "radix alphabet invalid")),
            }
        } else {
            None
        };
        // seg_count * 24 <= buf.len() was checked above, so this allocation is bounded.
        let mut segments = Vec::with_capacity(seg_count as usize);
        for i in 0..seg_count {
            let at = r.pos;
            let first_key = r.u64()?;
            let first_pos = r.u64()?;
            let slope = f64::from_bits(r.u64()?);
            if !(slope.is_finite() && slope >= 0.0) {
                return Err(corrupt(at + 16, "slope not finite and non-negative"));
            }
            let intercept = match fit {
                PlrFit::Cone => first_pos as f64,
                PlrFit::Pivot => f64::from_bits(r.u64()?),
            };
            if !intercept.is_finite() {
                return Err(corrupt(at + 24, "intercept not finite"));
            }
            if first_pos > keys {
                return Err(corrupt(at + 8, "segment position beyond the key count"));
            }
            if i == 0 && first_pos != 0 {
                return Err(corrupt(
                    at + 8,
                    "first segment does not start at position 0",
                ));
            }
            if let Some(prev) = segments.last() {
                let prev: &Segment = prev;
                if first_key <= prev.first_key {
                    return Err(corrupt(at, "segment keys not strictly increasing"));
                }
                if first_pos < prev.first_pos {
                    return Err(corrupt(at + 8, "segment positions decreasing"));
                }
            }
            segments.push(Segment {
                first_key,
                first_pos,
                slope,
                intercept,
            });
        }
        let quality = Quality {
            keys,
            distinct_keys: distinct,
            max_run,
            mean_window,
            segments: seg_count,
        };
        let model = PlrModel::from_parts(delta, fit, keys, has_dup_runs, quality, segments);
        Ok(LearnedIndex::from_parts(
            KeyMapper::from_parts(prefix, radix),
            model,
        ))
    }
}

fn corrupt(offset: usize, reason: &'static str) -> LearnError {
    LearnError::Corrupt { offset, reason }
}

/// Bounds-checked little-endian reader.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let available = self.buf.len().saturating_sub(self.pos);
        if n > available {
            return Err(LearnError::Truncated {
                offset: self.pos,
                needed: n,
                available,
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> LearnedIndex {
        sample_fit(crate::plr::PLR_FIT_DEFAULT)
    }

    fn sample_fit(fit: PlrFit) -> LearnedIndex {
        let keys: Vec<Vec<u8>> = (0..3000u64)
            .map(|i| {
                let mut k = b"tbl/".to_vec();
                k.extend_from_slice(&(i * i / 7).to_be_bytes());
                k
            })
            .collect();
        LearnedIndex::train_with(&keys, 4, fit).unwrap()
    }

    #[test]
    fn round_trip_preserves_the_model_and_its_predictions() {
        let idx = sample();
        let bytes = idx.encode();
        assert_eq!(bytes.len(), idx.encoded_len());
        let back = LearnedIndex::decode(&bytes).unwrap();
        assert_eq!(back, idx);
        assert_eq!(
            back.predict(b"tbl/\0\0\0\0\0\0\x01\0"),
            idx.predict(b"tbl/\0\0\0\0\0\0\x01\0")
        );
    }

    #[test]
    fn both_fits_round_trip() {
        let keys: Vec<[u8; 8]> = (0..5000u64).map(|i| (i * i * 5).to_be_bytes()).collect();
        for fit in [PlrFit::Cone, PlrFit::Pivot] {
            let idx = LearnedIndex::train_with(&keys, 4, fit).unwrap();
            let back = LearnedIndex::decode(&idx.encode()).unwrap();
            assert_eq!(back, idx);
            assert_eq!(back.model().fit(), fit);
        }
    }

    #[test]
    fn empty_index_round_trips() {
        let idx = LearnedIndex::train::<Vec<u8>>(&[], 8).unwrap();
        let bytes = idx.encode();
        assert_eq!(bytes.len(), HEADER_LEN + TRAILER_LEN);
        assert_eq!(LearnedIndex::decode(&bytes).unwrap(), idx);
    }

    #[test]
    fn worked_example_from_the_format_doc() {
        // Keys 10, 20, 30 as 8-byte big-endian integers, delta 8 (docs/formats/learned-model.md).
        let keys: Vec<[u8; 8]> = [10u64, 20, 30].iter().map(|k| k.to_be_bytes()).collect();
        let idx = LearnedIndex::train_with(&keys, 8, PlrFit::Cone).unwrap();
        let hex: String = idx.encode().iter().map(|b| format!("{b:02x}")).collect();
        let expected = concat!(
            "41544c4d",
            "0100",
            "01",
            "00",
            "08000000",
            "07000000",
            "0300000000000000",
            "0300000000000000",
            "0100000000000000",
            "0100000000000000",
            "0000000000003340",
            "00000000000000",
            "000000000000000a",
            "0000000000000000",
            "9a9999999999393c",
            "b6a7abb8",
        );
        assert_eq!(hex, expected);
    }

    #[test]
    fn flipped_bit_is_a_checksum_error() {
        let mut bytes = sample().encode();
        bytes[HEADER_LEN + 30] ^= 0x10;
        assert!(matches!(
            LearnedIndex::decode(&bytes),
            Err(LearnError::ChecksumMismatch { .. })
        ));
    }

    #[test]
    fn truncation_is_reported_as_truncated() {
        let bytes = sample().encode();
        for cut in [0, 3, 10, HEADER_LEN, bytes.len() - 1] {
            let e = LearnedIndex::decode(&bytes[..cut]).unwrap_err();
            assert!(matches!(e, LearnError::Truncated { .. }), "cut {cut}: {e}");
        }
    }

    #[test]
    fn trailing_bytes_are_corruption() {
        let mut bytes = sample().encode();
        bytes.push(0);
        assert!(matches!(
            LearnedIndex::decode(&bytes),
            Err(LearnError::Corrupt { .. })
        ));
    }

    #[test]
    fn newer_version_is_refused_clearly() {
        let mut bytes = sample().encode();
        bytes[4] = 3;
        assert_eq!(
            LearnedIndex::decode(&bytes).unwrap_err(),
            LearnError::UnsupportedVersion {
                found: 3,
                supported: 2
            }
        );
    }

    #[test]
    fn radix_models_round_trip_and_damage_is_caught() {
        let keys: Vec<Vec<u8>> = (0..3000u64)
            .map(|i| format!("user{:012}", i * 7_919_993).into_bytes())
            .collect();
        let mapper = KeyMapper::for_keys(
            &keys[0],
            &keys[keys.len() - 1],
            keys.iter().map(Vec::as_slice),
        );
        assert!(mapper.radix().is_some());
        let mut b = LearnedIndex::builder_with_mapper(mapper, 8).unwrap();
        for k in &keys {
            b.push(k).unwrap();
        }
        let idx = b.finish();
        let bytes = idx.encode();
        assert_eq!(bytes.len(), idx.encoded_len());
        assert_eq!(u16::from_le_bytes([bytes[4], bytes[5]]), 2);
        let back = LearnedIndex::decode(&bytes).unwrap();
        assert_eq!(back, idx);
        for (pos, k) in keys.iter().enumerate() {
            let w = back.predict(k);
            assert!(w.lo <= pos as u64 && (pos as u64) < w.hi, "key {pos}");
        }
        // An empty alphabet set behind a valid checksum is structural corruption.
        let mut bad = bytes.clone();
        let at = HEADER_LEN + idx.mapper().prefix().len() + 1;
        bad[at..at + 32].fill(0);
        reseal(&mut bad);
        assert!(LearnedIndex::decode(&bad).unwrap_err().is_corruption());
        // Truncated inside the radix section.
        assert!(LearnedIndex::decode(&bytes[..at + 5])
            .unwrap_err()
            .is_corruption());
    }

    /// Re-seals `bytes` with a fresh checksum, so structural checks (not the CRC) must reject.
    fn reseal(bytes: &mut [u8]) {
        let n = bytes.len() - TRAILER_LEN;
        let crc = crc32c::crc32c(&bytes[..n]);
        bytes[n..].copy_from_slice(&crc.to_le_bytes());
    }

    #[test]
    fn well_sealed_nonsense_is_rejected_structurally() {
        let idx = sample_fit(PlrFit::Pivot); // 32-byte segments with an intercept
        assert!(idx.model().segment_count() >= 2);
        let good = idx.encode();
        let seg0 = HEADER_LEN + idx.mapper().prefix().len();
        let cases: Vec<(usize, Vec<u8>, &str)> = vec![
            (6, vec![9], "kind"),
            (8, 0u32.to_le_bytes().to_vec(), "delta"),
            (
                seg0 + 16,
                f64::NAN.to_bits().to_le_bytes().to_vec(),
                "slope",
            ),
            (seg0 + 8, 5u64.to_le_bytes().to_vec(), "first position"),
            (
                seg0 + SEGMENT_LEN_PIVOT,
                0u64.to_le_bytes().to_vec(),
                "keys order",
            ),
            (
                seg0 + 24,
                f64::INFINITY.to_bits().to_le_bytes().to_vec(),
                "intercept",
            ),
        ];
        for (at, patch, what) in cases {
            let mut b = good.clone();
            b[at..at + patch.len()].copy_from_slice(&patch);
            reseal(&mut b);
            let e = LearnedIndex::decode(&b).unwrap_err();
            assert!(matches!(e, LearnError::Corrupt { .. }), "{what}: {e}");
        }
    }

    #[test]
    fn huge_segment_count_does_not_allocate() {
        let mut b = sample().encode();
        b[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = LearnedIndex::decode(&b).unwrap_err();
        assert!(e.is_corruption(), "{e}");
        b[40..48].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(LearnedIndex::decode(&b).unwrap_err().is_corruption());
    }

    fn mutate(mut v: Vec<u8>, flips: &[(usize, u8)], cut: usize, extra: &[u8]) -> Vec<u8> {
        for &(at, x) in flips {
            if !v.is_empty() {
                let i = at % v.len();
                v[i] ^= x;
            }
        }
        v.truncate(v.len().saturating_sub(cut));
        v.extend_from_slice(extra);
        v
    }

    /// Decodes and, if that succeeds, exercises the model (which must then be sound).
    fn decode_and_use(bytes: &[u8]) {
        if let Ok(idx) = LearnedIndex::decode(bytes) {
            for probe in [
                &b""[..],
                b"tbl/",
                b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
            ] {
                let r = idx.predict(probe);
                assert!(r.lo <= r.hi && r.hi <= idx.model().len());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn decoder_survives_mutations(flips in prop::collection::vec((any::<usize>(), 1u8..), 0..4),
                                      cut in 0usize..40,
                                      extra in prop::collection::vec(any::<u8>(), 0..16),
                                      pivot in any::<bool>()) {
            let fit = if pivot { PlrFit::Pivot } else { PlrFit::Cone };
            decode_and_use(&mutate(sample_fit(fit).encode(), &flips, cut, &extra));
        }

        #[test]
        fn decoder_survives_resealed_mutations(
            flips in prop::collection::vec((any::<usize>(), 1u8..), 1..4), pivot in any::<bool>()) {
            // Mutations behind a valid checksum reach the structural checks.
            let fit = if pivot { PlrFit::Pivot } else { PlrFit::Cone };
            let mut b = mutate(sample_fit(fit).encode(), &flips, 0, &[]);
            reseal(&mut b);
            decode_and_use(&b);
        }

        #[test]
        fn decoder_survives_random_bytes(data in prop::collection::vec(any::<u8>(), 0..300)) {
            decode_and_use(&data);
        }
    }
}
