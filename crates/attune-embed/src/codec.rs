//! EVMix codecs: embedding rows stored in 32, 16, 8 or 4 bits per value.
//!
//! The source's codecs assume values in [−1, 1] (embedding values of a trained model rarely leave
//! it). **Out-of-range rule:** values outside [−1, 1] are *clipped* to ±1 by the 16/8/4-bit codecs
//! (fp32 stores them exactly); every clipped value is counted so the caller sees it in the stats.
//! Clipping keeps the code tables static (no per-row scale to store and apply on every decode),
//! which is what makes decoding a table lookup.
//!
//! * 16 bit: `code = 2·round(|v|·32767) + sign` (the low bit is the sign, as in the source:
//!   odd = negative); decode `(code >> 1) / 32767`, negated when odd. Step 1/32767.
//! * 8 bit: `code = round((v + 1)·127)` in `0..=254` (−1 → 0, 0 → 127, +1 → 254; 0.23 → 156 as
//!   in the source); decode `code/127 − 1`. Step 1/127.
//! * 4 bit: 15 levels, zero and ±{1/64, 1/32, 1/16, 1/8, 1/4, 1/2, 1}: three levels inside the
//!   dense region ±0.0625, doubling outwards (posit-like). Encode picks the nearest level; decode
//!   is a table lookup (code 15 is never written and decodes to 0): a 256-entry table of value
//!   pairs decodes a whole byte at once. Two values per byte, the even-indexed value in the low
//!   nibble.

/// Storage precision of a cache tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Precision {
    /// 32-bit float, exact.
    F32,
    /// 16-bit sign-in-low-bit fixed point.
    B16,
    /// 8-bit linear.
    B8,
    /// 4-bit table code.
    B4,
}

/// The 4-bit code table: code 7 is zero, 8..=14 positive, 0..=6 negative (mirror), 15 unused.
pub const B4_LEVELS: [f32; 16] = [
    -1.0, -0.5, -0.25, -0.125, -0.0625, -0.03125, -0.015625, 0.0, 0.015625, 0.03125, 0.0625, 0.125,
    0.25, 0.5, 1.0, 0.0,
];

impl Precision {
    /// From a bit count: 32, 16, 8 or 4.
    pub fn from_bits(bits: u32) -> Option<Self> {
        match bits {
            32 => Some(Precision::F32),
            16 => Some(Precision::B16),
            8 => Some(Precision::B8),
            4 => Some(Precision::B4),
            _ => None,
        }
    }

    /// Bits per value.
    pub fn bits(self) -> u32 {
        match self {
            Precision::F32 => 32,
            Precision::B16 => 16,
            Precision::B8 => 8,
            Precision::B4 => 4,
        }
    }

    /// Bytes of one encoded row of `dim` values.
    pub fn row_bytes(self, dim: usize) -> usize {
        match self {
            Precision::F32 => dim * 4,
            Precision::B16 => dim * 2,
            Precision::B8 => dim,
            Precision::B4 => dim.div_ceil(2),
        }
    }

    /// Encodes `src` into `dst` (`row_bytes(src.len())` bytes); returns how many values were
    /// clipped to [−1, 1]. Values must be finite (the store rejects others at load).
    pub fn encode(self, src: &[f32], dst: &mut [u8]) -> u32 {
        let mut clipped = 0u32;
        let mut clip = |v: f32| -> f32 {
            if v > 1.0 {
                clipped += 1;
                1.0
            } else if v < -1.0 {
                clipped += 1;
                -1.0
            } else {
                v
            }
        };
        match self {
            Precision::F32 => {
                for (v, d) in src.iter().zip(dst.chunks_exact_mut(4)) {
                    d.copy_from_slice(&v.to_le_bytes());
                }
                return 0;
            }
            Precision::B16 => {
                for (&v, d) in src.iter().zip(dst.chunks_exact_mut(2)) {
                    let v = clip(v);
                    let m = (v.abs() * 32767.0).round() as u16;
                    let code = m * 2 + u16::from(v < 0.0 && m != 0);
                    d.copy_from_slice(&code.to_le_bytes());
                }
            }
            Precision::B8 => {
                for (&v, d) in src.iter().zip(dst.iter_mut()) {
                    *d = ((clip(v) + 1.0) * 127.0).round() as u8;
                }
            }
            Precision::B4 => {
                for (i, &v) in src.iter().enumerate() {
                    let code = b4_code(clip(v));
                    let byte = &mut dst[i / 2];
                    if i % 2 == 0 {
                        *byte = (*byte & 0xF0) | code;
                    } else {
                        *byte = (*byte & 0x0F) | (code << 4);
                    }
                }
            }
        }
        clipped
    }

    /// Decodes `dst.len()` values from `src`.
    pub fn decode(self, src: &[u8], dst: &mut [f32]) {
        match self {
            Precision::F32 => {
                for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
                    *d = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
                }
            }
            Precision::B16 => {
                // Eight values at a time through fixed-size arrays, so the compiler vectorises
                // the gather, the int-to-float conversion and the sign (3× faster than a plain
                // per-value loop).
                let mut d8 = dst.chunks_exact_mut(8);
                let mut s16 = src.chunks_exact(16);
                for (d, s) in (&mut d8).zip(&mut s16) {
                    let (Ok(d), Ok(s)) = (<&mut [f32; 8]>::try_from(d), <&[u8; 16]>::try_from(s))
                    else {
                        continue;
                    };
                    let mut codes = [0u32; 8];
                    for (j, c) in codes.iter_mut().enumerate() {
                        *c = u32::from(u16::from_le_bytes([s[2 * j], s[2 * j + 1]]));
                    }
                    for (o, &c) in d.iter_mut().zip(codes.iter()) {
                        *o = b16_value(c);
                    }
                }
                let rest = d8.into_remainder();
                for (d, s) in rest.iter_mut().zip(s16.remainder().chunks_exact(2)) {
                    *d = b16_value(u32::from(u16::from_le_bytes([s[0], s[1]])));
                }
            }
            Precision::B8 => {
                for (d, &s) in dst.iter_mut().zip(src.iter()) {
                    *d = f32::from(s) * (1.0 / 127.0) - 1.0;
                }
            }
            Precision::B4 => {
                // One 256-entry table of value pairs: a byte decodes to two values at once.
                let pairs = b4_pairs();
                let half = dst.len() / 2;
                let mut out = dst.chunks_exact_mut(2);
                for (d, &b) in (&mut out).zip(src.iter()) {
                    d.copy_from_slice(&pairs[b as usize]);
                }
                if let (Some(last), Some(&b)) = (out.into_remainder().first_mut(), src.get(half)) {
                    *last = B4_LEVELS[(b & 0x0F) as usize];
                }
            }
        }
    }
}

/// The value of a 16-bit code: the magnitude `(code >> 1) / 32767` with the low bit as its sign.
#[inline(always)]
fn b16_value(code: u32) -> f32 {
    let m = (code >> 1) as i32 as f32 * (1.0 / 32767.0);
    f32::from_bits(m.to_bits() | ((code & 1) << 31))
}

/// Decoded value pairs of every 4-bit byte (low nibble first).
fn b4_pairs() -> &'static [[f32; 2]; 256] {
    static PAIRS: std::sync::OnceLock<[[f32; 2]; 256]> = std::sync::OnceLock::new();
    PAIRS.get_or_init(|| {
        let mut t = [[0f32; 2]; 256];
        for (b, e) in t.iter_mut().enumerate() {
            *e = [B4_LEVELS[b & 0x0F], B4_LEVELS[b >> 4]];
        }
        t
    })
}

/// The nearest 4-bit level's code for `v` in [−1, 1].
fn b4_code(v: f32) -> u8 {
    let mut best = 7u8;
    let mut best_err = v.abs();
    for (c, &l) in B4_LEVELS[..15].iter().enumerate() {
        let err = (v - l).abs();
        if err < best_err {
            best = c as u8;
            best_err = err;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(p: Precision, v: &[f32]) -> (Vec<f32>, u32) {
        let mut buf = vec![0u8; p.row_bytes(v.len())];
        let clipped = p.encode(v, &mut buf);
        let mut out = vec![0f32; v.len()];
        p.decode(&buf, &mut out);
        (out, clipped)
    }

    #[test]
    fn source_examples() {
        let mut b = [0u8; 3];
        Precision::B8.encode(&[-1.0, 0.23, 1.0], &mut b);
        assert_eq!(b, [0, 156, 254]);
        let mut b = [0u8; 4];
        Precision::B16.encode(&[1.0, -1.0], &mut b);
        assert_eq!(u16::from_le_bytes([b[0], b[1]]), 65534);
        assert_eq!(u16::from_le_bytes([b[2], b[3]]), 65535);
    }

    #[test]
    fn error_bounds_in_range() {
        let v: Vec<f32> = (0..2001).map(|i| i as f32 / 1000.0 - 1.0).collect();
        for (p, bound) in [
            (Precision::F32, 0.0),
            (Precision::B16, 0.5 / 32767.0 + 1e-6),
            (Precision::B8, 0.5 / 127.0 + 1e-6),
        ] {
            let (out, clipped) = roundtrip(p, &v);
            assert_eq!(clipped, 0);
            for (a, b) in v.iter().zip(&out) {
                assert!((a - b).abs() <= bound, "{p:?}: {a} -> {b}");
            }
        }
        // 4 bit: the nearest level, so the error is at most half the gap around v.
        let (out, _) = roundtrip(Precision::B4, &v);
        for (a, b) in v.iter().zip(&out) {
            let nearest = B4_LEVELS[..15]
                .iter()
                .map(|l| (a - l).abs())
                .fold(f32::MAX, f32::min);
            assert!(((a - b).abs() - nearest).abs() < 1e-7);
        }
    }

    #[test]
    fn four_bit_levels_and_packing() {
        let pos = B4_LEVELS.iter().filter(|&&l| l > 0.0).count();
        let neg = B4_LEVELS.iter().filter(|&&l| l < 0.0).count();
        assert_eq!((pos, neg), (7, 7));
        let dense = B4_LEVELS
            .iter()
            .filter(|&&l| l > 0.0 && l <= 0.0625)
            .count();
        assert_eq!(dense, 3);
        // Odd length: the last byte's high nibble is untouched padding.
        let (out, _) = roundtrip(Precision::B4, &[0.0, 0.02, -0.3, 0.9, -0.011]);
        assert_eq!(out, vec![0.0, 0.015625, -0.25, 1.0, -0.015625]);
        assert_eq!(Precision::B4.row_bytes(5), 3);
    }

    #[test]
    fn table_decodes_match_the_per_value_rule() {
        for b in 0..=255u8 {
            let mut out = [0f32; 2];
            Precision::B4.decode(&[b], &mut out);
            assert_eq!(
                out,
                [B4_LEVELS[(b & 15) as usize], B4_LEVELS[(b >> 4) as usize]]
            );
        }
        for code in 0..=u16::MAX {
            let mut out = [0f32; 1];
            Precision::B16.decode(&code.to_le_bytes(), &mut out);
            let m = f32::from(code >> 1) * (1.0 / 32767.0);
            let want = if code & 1 == 1 { -m } else { m };
            assert_eq!(out[0].to_bits(), want.to_bits(), "code {code}");
        }
    }

    #[test]
    fn clipping_is_counted() {
        for p in [Precision::B16, Precision::B8, Precision::B4] {
            let (out, clipped) = roundtrip(p, &[3.0, -2.0, 0.5]);
            assert_eq!(clipped, 2, "{p:?}");
            assert!((out[0] - 1.0).abs() < 1e-6 && (out[1] + 1.0).abs() < 1e-6);
        }
        let (out, clipped) = roundtrip(Precision::F32, &[3.0, -2.0]);
        assert_eq!((out, clipped), (vec![3.0, -2.0], 0));
    }
}
