//! Sort-benchmark records: 100 bytes each, a 10-byte key first, in the layout of the sort
//! benchmark's `gensort -a` (printable, so line-oriented tools such as GNU `sort` sort them too):
//!
//! ```text
//! bytes  0..10   key: 10 printable ASCII characters (0x20..=0x7E), uniform
//!       10..12   two spaces
//!       12..44   the record's index, 32 uppercase hex digits
//!       44..46   two spaces
//!       46..98   filler: 52 letters derived from the index
//!       98..100  "\r\n"
//! ```
//!
//! Record `i` of seed `s` is a pure function of `(s, i)`, so any slice of a data set can be made
//! on its own and in parallel. Sorting by the whole line (GNU `sort` in the C locale) and by the
//! 10-byte key give the same order unless two keys are equal (95^10 ≈ 6e19 keys: a collision
//! among 1e8 records has probability ≈ 1e-4).

use crate::rng::hash3;

/// Bytes per record.
pub const RECORD_BYTES: usize = 100;
/// Bytes of the key at the start of each record.
pub const KEY_BYTES: usize = 10;

/// Writes record `i` of `seed` into `out`.
pub fn record(seed: u64, i: u64, out: &mut [u8; RECORD_BYTES]) {
    let mut h = hash3(seed, 0x50_52_54, i);
    let h2 = hash3(seed, 0x50_52_55, i);
    for (j, b) in out[..KEY_BYTES].iter_mut().enumerate() {
        if j == 9 {
            h = h2;
        }
        *b = 0x20 + (h % 95) as u8;
        h /= 95;
    }
    out[10] = b' ';
    out[11] = b' ';
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for (j, b) in out[12..44].iter_mut().enumerate() {
        let shift = 4 * (31 - j);
        *b = if shift >= 64 {
            b'0'
        } else {
            HEX[((i >> shift) & 0xf) as usize]
        };
    }
    out[44] = b' ';
    out[45] = b' ';
    for (j, b) in out[46..98].iter_mut().enumerate() {
        *b = b'A' + ((i as usize + j) % 26) as u8;
    }
    out[98] = b'\r';
    out[99] = b'\n';
}

/// Fills `out` (a multiple of 100 bytes) with records `first..` of `seed`.
pub fn fill(seed: u64, first: u64, out: &mut [u8]) {
    for (k, chunk) in out.chunks_exact_mut(RECORD_BYTES).enumerate() {
        let mut rec = [0u8; RECORD_BYTES];
        record(seed, first + k as u64, &mut rec);
        chunk.copy_from_slice(&rec);
    }
}

/// Appends line `i` of `seed` to `out`: `len_min..=len_max` printable ASCII characters
/// (0x20..=0x7E, uniform; the length uniform too), then `\n`. A pure function of `(seed, i)`,
/// like [`record`]: the variable-length input of the external sort (sorted by the whole line).
pub fn line(seed: u64, i: u64, len_min: usize, len_max: usize, out: &mut Vec<u8>) {
    let span = len_max.saturating_sub(len_min) as u64 + 1;
    let len = len_min + (hash3(seed, 0x4c_49_4e, i) % span) as usize;
    let mut h = 0u64;
    for j in 0..len {
        // Nine characters per 64-bit draw (95^9 < 2^64).
        if j % 9 == 0 {
            h = hash3(seed, 0x4c_49_4f, i.wrapping_mul(1 << 24) ^ (j / 9) as u64);
        }
        out.push(0x20 + (h % 95) as u8);
        h /= 95;
    }
    out.push(b'\n');
}

/// Appends lines `first..first + count` of `seed` to `out` (see [`line`]).
pub fn fill_lines(
    seed: u64,
    first: u64,
    count: u64,
    len_min: usize,
    len_max: usize,
    out: &mut Vec<u8>,
) {
    for i in first..first + count {
        line(seed, i, len_min, len_max, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_printable_of_the_given_lengths_and_repeatable() {
        let mut a = Vec::new();
        fill_lines(3, 0, 500, 10, 200, &mut a);
        let lines: Vec<&[u8]> = a.split(|&b| b == b'\n').collect();
        assert_eq!(lines.len(), 501); // the last `\n` leaves an empty tail
        assert!(lines[..500].iter().all(|l| (10..=200).contains(&l.len())));
        assert!(a.iter().all(|&b| b == b'\n' || (0x20..=0x7e).contains(&b)));
        let mut b = Vec::new();
        fill_lines(3, 250, 250, 10, 200, &mut b);
        assert!(a.ends_with(&b));
        let mut c = Vec::new();
        line(3, 0, 0, 0, &mut c);
        assert_eq!(c, b"\n");
    }

    #[test]
    fn records_are_printable_lines_with_the_index() {
        let mut r = [0u8; RECORD_BYTES];
        record(7, 0x1234, &mut r);
        assert!(r[..98].iter().all(|&b| (0x20..=0x7e).contains(&b)));
        assert_eq!(&r[98..], b"\r\n");
        assert_eq!(&r[40..44], b"1234");
        let mut again = [0u8; RECORD_BYTES];
        record(7, 0x1234, &mut again);
        assert_eq!(r, again);
        record(8, 0x1234, &mut again);
        assert_ne!(r[..10], again[..10]);
    }

    #[test]
    fn fill_matches_record_by_record() {
        let mut buf = vec![0u8; 3 * RECORD_BYTES];
        fill(1, 10, &mut buf);
        let mut r = [0u8; RECORD_BYTES];
        record(1, 11, &mut r);
        assert_eq!(&buf[100..200], &r[..]);
    }
}
