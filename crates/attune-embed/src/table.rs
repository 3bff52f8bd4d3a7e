//! The backing store: one flat file per table of fixed-size fp32 rows, read with `pread`.
//!
//! Format (`docs/formats/embed-table.md`): a 64-byte header, then `rows × dim` little-endian
//! f32 values, row-major (row `k` at byte `64 + k·dim·4`).
//!
//! ```text
//! 0  magic "ATEMBTBL"      8  version u32 = 1     12 dtype u32 = 1 (f32 LE)
//! 16 dim u32               20 reserved u32 = 0    24 rows u64
//! 32 data crc32c u32       36 header crc32c u32 (of bytes 0..36)    40..64 zero
//! ```
//!
//! Open checks the magic, the header checksum, the version, the dtype and that the file length is
//! exactly `64 + rows·dim·4`; [`TableFile::verify`] also recomputes the data checksum (a full
//! read). Bulk loads write `.<name>.emb.tmp`, fsync it, rename it over `<name>.emb` and fsync the
//! directory, so a crash (SIGKILL included) mid-load leaves the old table or the new one, never a
//! mix; a leftover temporary file is ignored by readers and replaced by the next load.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{io_err, EmbedError, Result};

/// Header magic.
pub const MAGIC: &[u8; 8] = b"ATEMBTBL";
/// Header length in bytes (the data starts here).
pub const HEADER_LEN: u64 = 64;
/// Format version.
pub const VERSION: u32 = 1;
/// dtype code of little-endian f32.
pub const DTYPE_F32: u32 = 1;
/// Largest dimension accepted. Default 65536 values: far above any embedding width in use.
pub const MAX_DIM: u32 = 1 << 16;

/// The file name of table `name`.
pub fn file_name(name: &str) -> String {
    format!("{name}.emb")
}

/// Checks a table name: 1–64 characters of `[A-Za-z0-9_-]`.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(EmbedError::InvalidArgument(format!(
            "table name `{name}` must be 1-64 characters of A-Z a-z 0-9 _ -"
        )))
    }
}

/// Checks a bulk load's inputs (either back end): the name, a `dim` in 1..=[`MAX_DIM`], a
/// length that is a whole number of rows, and finite values (naming the first bad row and
/// column).
pub fn check_values(name: &str, dim: usize, values: &[f32]) -> Result<()> {
    check_name(name)?;
    if dim == 0 || dim > MAX_DIM as usize {
        return Err(EmbedError::InvalidArgument(format!(
            "table `{name}`: dim {dim} must be in 1..={MAX_DIM}"
        )));
    }
    if !values.len().is_multiple_of(dim) {
        return Err(EmbedError::InvalidArgument(format!(
            "table `{name}`: {} values is not a whole number of rows of dim {dim}",
            values.len()
        )));
    }
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(EmbedError::InvalidArgument(format!(
            "table `{name}`: non-finite value {} at row {}, column {}",
            values[i],
            i / dim,
            i % dim
        )));
    }
    Ok(())
}

/// An open table file.
#[derive(Debug)]
pub struct TableFile {
    path: PathBuf,
    file: File,
    dim: usize,
    rows: u64,
    data_crc: u32,
}

fn header(dim: u32, rows: u64, data_crc: u32) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&DTYPE_F32.to_le_bytes());
    h[16..20].copy_from_slice(&dim.to_le_bytes());
    h[24..32].copy_from_slice(&rows.to_le_bytes());
    h[32..36].copy_from_slice(&data_crc.to_le_bytes());
    let hc = crc32c::crc32c(&h[0..36]);
    h[36..40].copy_from_slice(&hc.to_le_bytes());
    h
}

fn u32_at(h: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]])
}

impl TableFile {
    /// Writes table `name` in `dir` from row-major `values` (`rows × dim`), atomically replacing
    /// any previous version. Rejects a zero or too large `dim`, a length not a multiple of
    /// `dim`, and non-finite values (naming the row and column).
    pub fn write(dir: &Path, name: &str, dim: usize, values: &[f32]) -> Result<()> {
        check_values(name, dim, values)?;
        let rows = (values.len() / dim) as u64;
        let final_path = dir.join(file_name(name));
        let tmp = dir.join(format!(".{}.tmp", file_name(name)));
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        // Header first with a zero data checksum, rewritten once the data is written: a reader
        // never sees the temporary file, so the order only matters for a clean error if the
        // file is copied by hand mid-write.
        f.write_all(&[0u8; HEADER_LEN as usize])
            .map_err(io_err(&tmp))?;
        let mut crc = 0u32;
        let mut buf = Vec::with_capacity(1 << 20);
        for chunk in values.chunks(1 << 18) {
            buf.clear();
            for v in chunk {
                buf.extend_from_slice(&v.to_le_bytes());
            }
            crc = crc32c::crc32c_append(crc, &buf);
            f.write_all(&buf).map_err(io_err(&tmp))?;
        }
        f.write_all_at(&header(dim as u32, rows, crc), 0)
            .map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
        drop(f);
        std::fs::rename(&tmp, &final_path).map_err(io_err(&final_path))?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(dir))?;
        Ok(())
    }

    /// Opens table `name` in `dir`, checking its header and length.
    pub fn open(dir: &Path, name: &str) -> Result<Self> {
        check_name(name)?;
        let path = dir.join(file_name(name));
        let mut file = File::open(&path).map_err(io_err(&path))?;
        let corrupt = |offset: u64, reason: String| EmbedError::Corruption {
            path: path.clone(),
            offset,
            reason,
        };
        let len = file.metadata().map_err(io_err(&path))?.len();
        if len < HEADER_LEN {
            return Err(corrupt(
                len,
                format!("file of {len} bytes has no 64-byte header"),
            ));
        }
        let mut h = [0u8; HEADER_LEN as usize];
        file.read_exact(&mut h).map_err(io_err(&path))?;
        if &h[0..8] != MAGIC {
            return Err(corrupt(
                0,
                "bad magic (not an attune embedding table)".into(),
            ));
        }
        if crc32c::crc32c(&h[0..36]) != u32_at(&h, 36) {
            return Err(corrupt(36, "header checksum mismatch".into()));
        }
        let version = u32_at(&h, 8);
        if version != VERSION {
            return Err(corrupt(8, format!("unsupported version {version}")));
        }
        let dtype = u32_at(&h, 12);
        if dtype != DTYPE_F32 {
            return Err(corrupt(12, format!("unsupported dtype code {dtype}")));
        }
        let dim = u32_at(&h, 16);
        if dim == 0 || dim > MAX_DIM {
            return Err(corrupt(16, format!("dim {dim} out of range")));
        }
        let rows = u64::from_le_bytes([h[24], h[25], h[26], h[27], h[28], h[29], h[30], h[31]]);
        let want = rows
            .checked_mul(u64::from(dim) * 4)
            .and_then(|d| d.checked_add(HEADER_LEN));
        if want != Some(len) {
            return Err(corrupt(
                len.min(want.unwrap_or(u64::MAX)),
                format!("file is {len} bytes, the header says {rows} rows of dim {dim}"),
            ));
        }
        Ok(TableFile {
            path,
            file,
            dim: dim as usize,
            rows,
            data_crc: u32_at(&h, 32),
        })
    }

    /// Values per row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of rows.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads row `key` into `out` (`dim` values) with one `pread`. `key < rows` is the caller's
    /// check (the store validates a whole batch first); a larger key is an `InvalidArgument`.
    pub fn read_row(&self, key: u64, out: &mut [f32], scratch: &mut Vec<u8>) -> Result<()> {
        if key >= self.rows {
            return Err(EmbedError::InvalidArgument(format!(
                "row {key} past the end of {} ({} rows)",
                self.path.display(),
                self.rows
            )));
        }
        let row_bytes = self.dim * 4;
        scratch.resize(row_bytes, 0);
        self.file
            .read_exact_at(scratch, HEADER_LEN + key * row_bytes as u64)
            .map_err(io_err(&self.path))?;
        for (o, s) in out.iter_mut().zip(scratch.chunks_exact(4)) {
            *o = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        }
        Ok(())
    }

    /// Re-reads the whole data region and checks its crc32c against the header.
    pub fn verify(&self) -> Result<()> {
        let total = self.rows * self.dim as u64 * 4;
        let mut crc = 0u32;
        let mut buf = vec![0u8; 1 << 20];
        let mut off = 0u64;
        while off < total {
            let n = (total - off).min(buf.len() as u64) as usize;
            self.file
                .read_exact_at(&mut buf[..n], HEADER_LEN + off)
                .map_err(io_err(&self.path))?;
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            off += n as u64;
        }
        if crc != self.data_crc {
            return Err(EmbedError::Corruption {
                path: self.path.clone(),
                offset: HEADER_LEN,
                reason: "data checksum mismatch".into(),
            });
        }
        Ok(())
    }

    /// Advises the kernel to drop this file's cached pages (`POSIX_FADV_DONTNEED`), so reads
    /// that follow measure the device rather than the page cache. Best effort.
    pub fn drop_page_cache(&self) {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is owned by `self.file` and open for the duration of the call.
        unsafe {
            libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize, dim: usize, base: f32) -> Vec<f32> {
        (0..n * dim).map(|i| base + i as f32 * 1e-3).collect()
    }

    #[test]
    fn write_open_read_verify() {
        let d = tempfile::tempdir().unwrap();
        TableFile::write(d.path(), "C1", 4, &rows(10, 4, 0.0)).unwrap();
        let t = TableFile::open(d.path(), "C1").unwrap();
        assert_eq!((t.dim(), t.rows()), (4, 10));
        let mut out = [0f32; 4];
        let mut s = Vec::new();
        t.read_row(3, &mut out, &mut s).unwrap();
        assert_eq!(out[..], rows(10, 4, 0.0)[12..16]);
        t.verify().unwrap();
        assert!(t.read_row(10, &mut out, &mut s).is_err());
    }

    #[test]
    fn bad_inputs_are_rejected() {
        let d = tempfile::tempdir().unwrap();
        let e = TableFile::write(d.path(), "x", 3, &[0.0; 4]).unwrap_err();
        assert!(e.to_string().contains("whole number of rows"), "{e}");
        let e = TableFile::write(d.path(), "x", 2, &[0.0, 1.0, f32::NAN, 0.0]).unwrap_err();
        assert!(e.to_string().contains("row 1, column 0"), "{e}");
        assert!(TableFile::write(d.path(), "../x", 2, &[0.0; 2]).is_err());
        assert!(TableFile::write(d.path(), "x", 0, &[]).is_err());
        assert!(!d.path().join("x.emb").exists());
    }

    #[test]
    fn damage_is_reported_as_corruption() {
        let d = tempfile::tempdir().unwrap();
        TableFile::write(d.path(), "t", 2, &rows(8, 2, 0.5)).unwrap();
        let p = d.path().join("t.emb");
        let good = std::fs::read(&p).unwrap();
        // Truncated.
        std::fs::write(&p, &good[..good.len() - 3]).unwrap();
        let e = TableFile::open(d.path(), "t").unwrap_err();
        assert!(matches!(e, EmbedError::Corruption { .. }), "{e}");
        // Header bit flip.
        let mut bad = good.clone();
        bad[17] ^= 1;
        std::fs::write(&p, &bad).unwrap();
        let e = TableFile::open(d.path(), "t").unwrap_err();
        assert!(e.to_string().contains("header checksum"), "{e}");
        // Data bit flip: open succeeds (header is fine), verify fails.
        let mut bad = good.clone();
        bad[70] ^= 1;
        std::fs::write(&p, &bad).unwrap();
        let t = TableFile::open(d.path(), "t").unwrap();
        assert!(t
            .verify()
            .unwrap_err()
            .to_string()
            .contains("data checksum"));
        // Not a table.
        std::fs::write(&p, vec![7u8; 100]).unwrap();
        assert!(TableFile::open(d.path(), "t").is_err());
    }

    #[test]
    fn reload_replaces_and_leftover_tmp_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        TableFile::write(d.path(), "t", 2, &rows(4, 2, 0.0)).unwrap();
        // A crashed load's leftover.
        std::fs::write(d.path().join(".t.emb.tmp"), b"partial").unwrap();
        let t = TableFile::open(d.path(), "t").unwrap();
        assert_eq!(t.rows(), 4);
        TableFile::write(d.path(), "t", 2, &rows(6, 2, 0.0)).unwrap();
        assert_eq!(TableFile::open(d.path(), "t").unwrap().rows(), 6);
        assert!(!d.path().join(".t.emb.tmp").exists());
    }
}
