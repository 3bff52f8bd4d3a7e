//! Little-endian fixed-width and LEB128 varint encoding. Decoders take untrusted bytes and return
//! `None` instead of panicking; callers turn `None` into a corruption error with a location.

#[inline]
pub fn put_fixed32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

#[inline]
pub fn put_fixed64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

#[inline]
pub fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

#[inline]
pub fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, v as u64)
}

/// Appends a varint length followed by the bytes.
pub fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint64(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

#[inline]
pub fn decode_fixed32(src: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(src.get(..4)?.try_into().ok()?))
}

#[inline]
pub fn decode_fixed64(src: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(src.get(..8)?.try_into().ok()?))
}

/// Decodes a varint; returns (value, bytes consumed). At most 10 bytes are read.
#[inline]
pub fn decode_varint64(src: &[u8]) -> Option<(u64, usize)> {
    // Fast paths: lengths in blocks are almost always below 128, and values' below 16 KiB.
    match *src {
        [b0, ..] if b0 < 0x80 => Some((u64::from(b0), 1)),
        [b0, b1, ..] if b1 < 0x80 => Some((u64::from(b0 & 0x7f) | u64::from(b1) << 7, 2)),
        _ => decode_varint64_long(src),
    }
}

#[inline(never)]
fn decode_varint64_long(src: &[u8]) -> Option<(u64, usize)> {
    let mut result: u64 = 0;
    for (i, &byte) in src.iter().enumerate().take(10) {
        let shift = 7 * i as u32;
        if i == 9 && byte > 1 {
            return None; // would overflow 64 bits
        }
        result |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some((result, i + 1));
        }
    }
    None
}

/// Decodes a varint that must fit in u32 (the decoders read u64 varints and bound them).
#[cfg(test)]
pub fn decode_varint32(src: &[u8]) -> Option<(u32, usize)> {
    let (v, n) = decode_varint64(src)?;
    Some((u32::try_from(v).ok()?, n))
}

/// A cursor over untrusted bytes: every read is bounds-checked.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    pub fn pos(&self) -> usize {
        self.pos
    }
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
    pub fn varint64(&mut self) -> Option<u64> {
        let (v, n) = decode_varint64(self.buf.get(self.pos..)?)?;
        self.pos += n;
        Some(v)
    }
    pub fn varint32(&mut self) -> Option<u32> {
        u32::try_from(self.varint64()?).ok()
    }
    pub fn fixed32(&mut self) -> Option<u32> {
        let v = decode_fixed32(self.buf.get(self.pos..)?)?;
        self.pos += 4;
        Some(v)
    }
    pub fn fixed64(&mut self) -> Option<u64> {
        let v = decode_fixed64(self.buf.get(self.pos..)?)?;
        self.pos += 8;
        Some(v)
    }
    pub fn u8(&mut self) -> Option<u8> {
        let v = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(v)
    }
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    pub fn length_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint64()?).ok()?;
        self.bytes(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trips_edge_values() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint64(&mut b, v);
            assert_eq!(decode_varint64(&b), Some((v, b.len())));
        }
    }

    #[test]
    fn one_two_and_three_byte_varints_round_trip_before_other_bytes() {
        for v in 0u64..(1 << 15) {
            let mut b = Vec::new();
            put_varint64(&mut b, v);
            let n = b.len();
            b.extend_from_slice(&[0xff, 0x01]);
            assert_eq!(decode_varint64(&b), Some((v, n)), "{v}");
        }
    }

    #[test]
    fn truncated_and_overlong_varints_are_rejected() {
        assert_eq!(decode_varint64(&[]), None);
        assert_eq!(decode_varint64(&[0x80]), None);
        assert_eq!(decode_varint64(&[0x80, 0x80]), None);
        assert_eq!(decode_varint64(&[0xff; 11]), None);
        assert_eq!(decode_varint32(&[0xff, 0xff, 0xff, 0xff, 0x7f]), None);
    }

    #[test]
    fn reader_never_reads_past_the_end() {
        let mut r = Reader::new(&[5, 1, 2]);
        assert_eq!(r.length_prefixed(), None);
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.fixed32(), None);
    }
}
