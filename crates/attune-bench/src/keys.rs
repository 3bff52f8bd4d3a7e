//! Keys and values with db_bench's semantics, so that our runs and RocksDB's own `db_bench` store the
//! same shapes of data.
//!
//! * Key for integer `i` with `key_size` bytes: the low `min(key_size, 8)` bytes of `i` big-endian,
//!   then `'0'` bytes up to `key_size` (db_bench's `GenerateKeyFromInt` without prefixes). Keys of
//!   consecutive integers therefore sort in integer order, which `fillseq` and `readseq` rely on.
//! * Values: a 1 MiB buffer made of 100-byte pieces, each half random printable characters and half
//!   a repeat of them (db_bench's `compression_ratio=0.5`), handed out as a sliding window.
//! * Random key choice: uniform over `[0, records)` from a per-thread seeded generator.
//!
//! Thread-safety: each type is owned by one thread (`Send`, not shared). Invariant: the same seed
//! gives the same keys and values on every run.

/// SplitMix64: a small, well-mixed, seedable generator (Steele, Lea, Flood 2014). Used only to
/// choose keys and fill values, never for anything that must be unpredictable.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`; equal seeds give equal streams.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)`; `n` must be positive (callers validate record counts first).
    pub fn below(&mut self, n: u64) -> u64 {
        // Multiply-shift (Lemire) avoids the modulo bias of `% n` for large n.
        ((u128::from(self.next_u64()) * u128::from(n.max(1))) >> 64) as u64
    }
}

/// Writes db_bench's key for `i` into `out` (resized to `key_size`).
pub fn make_key(i: u64, key_size: usize, out: &mut Vec<u8>) {
    out.clear();
    let fill = key_size.min(8);
    let be = i.to_be_bytes();
    out.extend_from_slice(&be[8 - fill..]);
    out.resize(key_size, b'0');
}

/// Bytes in the value buffer: 1 MiB as in db_bench, or one value if values are larger.
const VALUE_BUFFER_BYTES: usize = 1 << 20;
/// Length of each compressible piece (db_bench uses 100).
const PIECE_BYTES: usize = 100;

/// Hands out values that compress to about `ratio` of their size.
#[derive(Debug, Clone)]
pub struct ValueGen {
    data: Vec<u8>,
    pos: usize,
}

impl ValueGen {
    /// A generator for values of up to `value_size` bytes, compressible to `ratio` (0 < ratio <= 1).
    pub fn new(seed: u64, value_size: usize, ratio: f64) -> Self {
        let mut rng = Rng::new(seed ^ 0x05EE_D0F7_A1E5);
        let total = VALUE_BUFFER_BYTES.max(value_size);
        let raw_len = ((PIECE_BYTES as f64 * ratio) as usize).clamp(1, PIECE_BYTES);
        let mut data = Vec::with_capacity(total + PIECE_BYTES);
        let mut raw = Vec::with_capacity(raw_len);
        while data.len() < total {
            raw.clear();
            raw.extend((0..raw_len).map(|_| b' ' + rng.below(95) as u8));
            let mut piece = 0;
            while piece < PIECE_BYTES {
                let take = raw_len.min(PIECE_BYTES - piece);
                data.extend_from_slice(&raw[..take]);
                piece += take;
            }
        }
        ValueGen { data, pos: 0 }
    }

    /// The next `len`-byte value (a window into the buffer; valid until the next call).
    pub fn next(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.data.len());
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        self.pos += len;
        &self.data[self.pos - len..self.pos]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_big_endian_then_ascii_zero_padding() {
        let mut k = Vec::new();
        make_key(0x0102, 16, &mut k);
        assert_eq!(&k[..8], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(&k[8..], b"00000000");
        make_key(0x0102, 4, &mut k);
        assert_eq!(k, vec![0, 0, 1, 2]);
    }

    #[test]
    fn keys_of_increasing_integers_sort_in_order() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for i in [0u64, 1, 255, 256, 65_535, 1 << 40] {
            make_key(i, 16, &mut a);
            make_key(i + 1, 16, &mut b);
            assert!(a < b, "key({i}) must sort before key({})", i + 1);
        }
    }

    #[test]
    fn values_are_printable_and_half_repeated() {
        let mut g = ValueGen::new(7, 100, 0.5);
        let v = g.next(100).to_vec();
        assert_eq!(v.len(), 100);
        assert!(v.iter().all(|b| (b' '..=b'~').contains(b)));
        assert_eq!(&v[..50], &v[50..]);
    }

    #[test]
    fn rng_below_stays_in_range_and_is_reproducible() {
        let seed = 42;
        println!("seed {seed}");
        let mut a = Rng::new(seed);
        let mut b = Rng::new(seed);
        for _ in 0..10_000 {
            let x = a.below(1000);
            assert!(x < 1000);
            assert_eq!(x, b.below(1000));
        }
    }
}
