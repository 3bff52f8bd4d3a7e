//! The I/O seam of the engine's bulk movers: compaction's table reads and writes and the value
//! log's garbage collection. [`BulkIo::Env`] (the default) uses the [`Env`] like every other
//! path; [`BulkIo::Pipes`] moves the same bytes through Data Pipes (`attune-pipes`, option
//! `pipes_bulk_io`, docs/data-pipes.md), with the runtime's mechanism (io_uring with registered
//! buffers and fixed files where the kernel allows, else pread/pwrite threads):
//!
//! - compaction inputs are read through two read-ahead windows per table (double buffering: the
//!   next window is in flight while the merge consumes the current one);
//! - compaction outputs are written from two library-owned buffers (one fills while the other is
//!   written), with the [`WritableFile`] durability contract: `flush` waits for every write and
//!   `sync` then `fdatasync`s;
//! - a collected value-log segment is read whole through a pipe.
//!
//! Pipes serve files of the operating system only: with an environment that is not
//! ([`Env::is_os_filesystem`] false, such as `MemEnv`), [`BulkIo::new`] gives `Env`.
//!
//! Thread safety: a [`PipesIo`] (one runtime per database) is shared by every compaction and
//! collection thread; each file it opens is used by one thread at a time (its state is behind a
//! mutex for the `RandomAccessFile` contract).

use super::{Env, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use attune_pipes as pipes;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes of one read-ahead window of a compaction input (two per input table).
pub const READ_WINDOW_BYTES: u64 = 512 << 10;
/// Bytes of one read window of a collected segment (read whole, so larger windows keep more
/// requests in flight).
pub const SEGMENT_WINDOW_BYTES: u64 = 4 << 20;
/// Bytes of one write buffer of a compaction output (two per output table).
pub const WRITE_BUFFER_BYTES: u64 = 1 << 20;

/// How compaction and value-log collection move their bytes.
#[derive(Clone, Default)]
pub enum BulkIo {
    /// Through the environment, like every other path.
    #[default]
    Env,
    /// Through Data Pipes.
    Pipes(Arc<PipesIo>),
}

impl BulkIo {
    /// Pipes when `pipes` is asked for and `env` keeps its files in the operating system's file
    /// system; the environment otherwise.
    pub fn new(pipes: bool, env: &dyn Env) -> Result<BulkIo> {
        if pipes && env.is_os_filesystem() {
            Ok(BulkIo::Pipes(Arc::new(PipesIo::new()?)))
        } else {
            Ok(BulkIo::Env)
        }
    }

    /// The mechanism in use: "env", or the pipes runtime's ("io_uring", "threads", ...).
    pub fn mechanism(&self) -> &'static str {
        match self {
            BulkIo::Env => "env",
            BulkIo::Pipes(p) => p.rt.report().mechanism.name(),
        }
    }

    /// Creates (or truncates) a compaction output.
    pub fn new_writable(&self, env: &dyn Env, path: &Path) -> Result<Box<dyn WritableFile>> {
        match self {
            BulkIo::Env => env.new_writable(path),
            BulkIo::Pipes(p) => Ok(Box::new(p.new_writable(path)?)),
        }
    }

    /// A file for a compaction's sequential read of an input table; None: use the engine's
    /// shared table cache as usual.
    pub fn open_sequential(&self, path: &Path) -> Result<Option<Arc<dyn RandomAccessFile>>> {
        match self {
            BulkIo::Env => Ok(None),
            BulkIo::Pipes(p) => Ok(Some(Arc::new(p.open_sequential(path, READ_WINDOW_BYTES)?))),
        }
    }

    /// The first `size` bytes of the file at `path` through pipes; None with `Env` (the caller
    /// reads as usual). A shorter file is corruption.
    pub fn read_prefix(&self, path: &Path, size: u64) -> Result<Option<Vec<u8>>> {
        match self {
            BulkIo::Env => Ok(None),
            BulkIo::Pipes(p) => p.read_prefix(path, size).map(Some),
        }
    }
}

/// One pipes runtime for a database's bulk I/O.
pub struct PipesIo {
    rt: pipes::Runtime,
}

/// Maps an attune-pipes error on `path` to the engine's.
fn pipe_error(op: &'static str, path: &Path, e: pipes::Error) -> Error {
    match e {
        pipes::Error::ShortFile {
            offset,
            len,
            file_len,
            ..
        } => Error::corruption(
            path,
            offset,
            format!("read of {len} bytes past end of file (size {file_len})"),
        ),
        pipes::Error::Io { errno, .. } | pipes::Error::NoSpace { errno, .. } => {
            Error::io(op, path, std::io::Error::from_raw_os_error(errno.0))
        }
        other => Error::io(op, path, std::io::Error::other(other.to_string())),
    }
}

impl PipesIo {
    /// Starts the runtime: the kernel's best mechanism, 8 requests in flight, 256 KiB requests.
    pub fn new() -> Result<PipesIo> {
        let rt = pipes::Runtime::new(pipes::RuntimeOptions {
            queue_depth: 8,
            block_bytes: 256 << 10,
            ..Default::default()
        })
        .map_err(|e| pipe_error("start pipes runtime", Path::new("pipes"), e))?;
        Ok(PipesIo { rt })
    }

    fn open_sequential(&self, path: &Path, window: u64) -> Result<PipeSeqFile> {
        let e = |e| pipe_error("open for pipes", path, e);
        let file = pipes::Locator::file(path, pipes::FileOptions::default()).map_err(e)?;
        let size = file.len().map_err(e)?;
        let mut windows = Vec::with_capacity(2);
        for _ in 0..2 {
            let mem = pipes::Locator::dram(window).map_err(e)?;
            let pipe = self
                .rt
                .pipe(&file, &mem, pipes::PipeOptions::default())
                .map_err(e)?;
            windows.push(Window {
                mem,
                pipe,
                start: 0,
                len: 0,
                pending: None,
            });
        }
        let plain = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
        Ok(PipeSeqFile {
            path: path.to_path_buf(),
            plain,
            size,
            window,
            state: Mutex::new(SeqState {
                windows,
                next: 0,
                stream_end: 0,
            }),
        })
    }

    fn new_writable(&self, path: &Path) -> Result<PipeWriter> {
        let e = |e| pipe_error("create for pipes", path, e);
        let file = pipes::Locator::file(
            path,
            pipes::FileOptions {
                write: true,
                create: true,
                truncate: true,
                ..Default::default()
            },
        )
        .map_err(e)?;
        let mut bufs = Vec::with_capacity(2);
        for _ in 0..2 {
            let mem = pipes::Locator::dram(WRITE_BUFFER_BYTES).map_err(e)?;
            let pipe = self
                .rt
                .pipe(&mem, &file, pipes::PipeOptions::default())
                .map_err(e)?;
            bufs.push(WriteBuf {
                mem,
                pipe,
                fill: 0,
                pending: None,
            });
        }
        Ok(PipeWriter {
            path: path.to_path_buf(),
            file,
            bufs,
            cur: 0,
            written: 0,
            len: 0,
        })
    }

    fn read_prefix(&self, path: &Path, size: u64) -> Result<Vec<u8>> {
        let f = self.open_sequential(path, SEGMENT_WINDOW_BYTES)?;
        if f.size < size {
            return Err(Error::corruption(
                path,
                f.size,
                format!(
                    "sealed value-log segment has {} bytes, the manifest says {size}",
                    f.size
                ),
            ));
        }
        let len = usize::try_from(size)
            .map_err(|_| Error::InvalidArgument(format!("segment of {size} bytes")))?;
        let mut out = vec![0u8; len];
        let mut off = 0usize;
        while off < len {
            let n = (len - off).min(f.window as usize);
            f.read_exact_at(&mut out[off..off + n], off as u64)?;
            off += n;
        }
        Ok(out)
    }
}

/// A read-ahead window: memory, its pipe from the file, and the range it holds (or will hold
/// once `pending` completes).
struct Window {
    mem: pipes::Locator,
    pipe: pipes::Pipe,
    start: u64,
    len: u64,
    pending: Option<pipes::Transfer>,
}

struct SeqState {
    windows: Vec<Window>,
    /// The window the stream reads now (the other one is ahead of it).
    next: usize,
    /// Where the last read served from a window ended.
    stream_end: u64,
}

/// A table read front to back through two windows; reads elsewhere (the footer, index and
/// filter when the table is opened) are plain positioned reads of just their bytes.
struct PipeSeqFile {
    path: PathBuf,
    plain: std::fs::File,
    size: u64,
    /// Bytes of each of the two windows.
    window: u64,
    state: Mutex<SeqState>,
}

impl Window {
    fn covers(&self, off: u64, len: u64) -> bool {
        off >= self.start && off + len <= self.start + self.len
    }

    fn settle(&mut self, path: &Path) -> Result<()> {
        if let Some(t) = self.pending.take() {
            t.wait().map_err(|e| pipe_error("pipe read", path, e))?;
        }
        Ok(())
    }

    fn start_load(&mut self, start: u64, file_size: u64, path: &Path) -> Result<()> {
        self.settle(path)?;
        self.start = start;
        self.len = self.mem.len().unwrap_or(0).min(file_size - start);
        self.pending = Some(
            self.pipe
                .transfer(start, 0, self.len)
                .map_err(|e| pipe_error("pipe read", path, e))?,
        );
        Ok(())
    }

    fn copy_out(&mut self, buf: &mut [u8], off: u64, path: &Path) -> Result<()> {
        self.settle(path)?;
        let g = self
            .mem
            .bytes()
            .map_err(|e| pipe_error("pipe read", path, e))?;
        let at = (off - self.start) as usize;
        buf.copy_from_slice(&g[at..at + buf.len()]);
        Ok(())
    }
}

impl Drop for SeqState {
    fn drop(&mut self) {
        // Nothing outlives its memory anyway (a transfer holds its pipe and locators); waiting
        // keeps a dropped compaction from leaving reads behind it.
        for w in &mut self.windows {
            if let Some(t) = w.pending.take() {
                t.cancel();
                let _ = t.wait();
            }
        }
    }
}

impl RandomAccessFile for PipeSeqFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let len = buf.len() as u64;
        if offset.checked_add(len).is_none_or(|e| e > self.size) {
            return Err(super::read_past_end(
                &self.path,
                offset,
                buf.len(),
                self.size,
            ));
        }
        if len == 0 {
            return Ok(());
        }
        let mut st = self.state.lock();
        let cur = st.next;
        let other = 1 - cur;
        if st.windows[cur].covers(offset, len) {
            st.windows[cur].copy_out(buf, offset, &self.path)?;
            st.stream_end = offset + len;
            return Ok(());
        }
        if st.windows[other].covers(offset, len) {
            // The stream moved into the window read ahead: it becomes current, and the old one
            // reads the range after it.
            st.next = other;
            st.windows[other].copy_out(buf, offset, &self.path)?;
            st.stream_end = offset + len;
            let ahead = st.windows[other].start + st.windows[other].len;
            if ahead < self.size {
                st.windows[cur].start_load(ahead, self.size, &self.path)?;
            }
            return Ok(());
        }
        let sequential = offset == 0 || offset == st.stream_end;
        if !sequential || len > self.window / 2 {
            // Metadata, or a block too large for a window: read just these bytes.
            drop(st);
            return self.read_direct(buf, offset);
        }
        // The stream starts (or jumped): load a window at it and the next one behind it.
        let start = offset / 4096 * 4096;
        st.windows[cur].start_load(start, self.size, &self.path)?;
        let ahead = st.windows[cur].start + st.windows[cur].len;
        if ahead < self.size {
            st.windows[other].start_load(ahead, self.size, &self.path)?;
        }
        if !st.windows[cur].covers(offset, len) {
            drop(st);
            return self.read_direct(buf, offset);
        }
        st.windows[cur].copy_out(buf, offset, &self.path)?;
        st.stream_end = offset + len;
        Ok(())
    }

    fn size(&self) -> u64 {
        self.size
    }
}

impl PipeSeqFile {
    /// A read outside the windows, with a plain positioned read.
    fn read_direct(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.plain
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io("pread", &self.path, e))
    }
}

/// One output buffer and its pipe to the file.
struct WriteBuf {
    mem: pipes::Locator,
    pipe: pipes::Pipe,
    fill: usize,
    pending: Option<pipes::Transfer>,
}

/// A compaction output written through two buffers: appends fill one while the other is written.
struct PipeWriter {
    path: PathBuf,
    file: pipes::Locator,
    bufs: Vec<WriteBuf>,
    cur: usize,
    /// File offset where the current buffer's bytes go.
    written: u64,
    len: u64,
}

impl PipeWriter {
    fn settle(&mut self, i: usize) -> Result<()> {
        if let Some(t) = self.bufs[i].pending.take() {
            t.wait()
                .map_err(|e| pipe_error("pipe write", &self.path, e))?;
        }
        Ok(())
    }

    /// Starts writing the current buffer and switches to the other one.
    fn ship(&mut self) -> Result<()> {
        let i = self.cur;
        let n = self.bufs[i].fill as u64;
        if n == 0 {
            return Ok(());
        }
        let t = self.bufs[i]
            .pipe
            .transfer(0, self.written, n)
            .map_err(|e| pipe_error("pipe write", &self.path, e))?;
        self.bufs[i].pending = Some(t);
        self.bufs[i].fill = 0;
        self.written += n;
        self.cur = 1 - i;
        self.settle(self.cur)
    }
}

impl WritableFile for PipeWriter {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let i = self.cur;
            let room = WRITE_BUFFER_BYTES as usize - self.bufs[i].fill;
            let n = room.min(data.len());
            {
                let b = &mut self.bufs[i];
                let mut g = b
                    .mem
                    .bytes()
                    .map_err(|e| pipe_error("pipe write", &self.path, e))?;
                g[b.fill..b.fill + n].copy_from_slice(&data[..n]);
                drop(g);
                b.fill += n;
            }
            self.len += n as u64;
            data = &data[n..];
            if self.bufs[i].fill == WRITE_BUFFER_BYTES as usize {
                self.ship()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.ship()?;
        self.settle(0)?;
        self.settle(1)
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file
            .sync()
            .map_err(|e| pipe_error("fdatasync", &self.path, e))
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for PipeWriter {
    fn drop(&mut self) {
        for b in &mut self.bufs {
            if let Some(t) = b.pending.take() {
                let _ = t.wait();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::PosixEnv;

    fn pipes_io() -> PipesIo {
        PipesIo::new().unwrap()
    }

    #[test]
    fn writes_then_reads_back_the_same_bytes_in_any_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let io = pipes_io();
        let data: Vec<u8> = (0..3_300_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut w = io.new_writable(&path).unwrap();
        // Appends of uneven sizes, crossing buffer boundaries.
        let mut off = 0;
        let mut step = 1usize;
        while off < data.len() {
            let n = step.min(data.len() - off);
            w.append(&data[off..off + n]).unwrap();
            off += n;
            step = step * 3 % 200_003 + 1;
        }
        w.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), data);
        w.sync().unwrap();
        assert_eq!(w.len(), data.len() as u64);
        drop(w);

        let f = io.open_sequential(&path, READ_WINDOW_BYTES).unwrap();
        // The table-open pattern (the end first), then a front-to-back stream, then a jump.
        let mut tail = vec![0u8; 48];
        f.read_exact_at(&mut tail, data.len() as u64 - 48).unwrap();
        assert_eq!(&tail[..], &data[data.len() - 48..]);
        let mut pos = 0usize;
        let mut n = 7usize;
        while pos < data.len() {
            let k = n.min(data.len() - pos);
            let mut b = vec![0u8; k];
            f.read_exact_at(&mut b, pos as u64).unwrap();
            assert_eq!(&b[..], &data[pos..pos + k], "at {pos}");
            pos += k;
            n = n * 5 % 70_001 + 1;
        }
        let mut b = vec![0u8; 1000];
        f.read_exact_at(&mut b, 1_234_567).unwrap();
        assert_eq!(&b[..], &data[1_234_567..1_235_567]);
        let mut big = vec![0u8; 600_000];
        f.read_exact_at(&mut big, 100).unwrap();
        assert_eq!(&big[..], &data[100..600_100]);
        assert!(f
            .read_exact_at(&mut b, data.len() as u64 - 10)
            .unwrap_err()
            .is_corruption());

        let whole = io.read_prefix(&path, 2_000_001).unwrap();
        assert_eq!(&whole[..], &data[..2_000_001]);
        assert!(io
            .read_prefix(&path, data.len() as u64 + 1)
            .unwrap_err()
            .is_corruption());
    }

    #[test]
    fn a_memory_env_keeps_the_env_path_and_a_posix_one_gets_pipes() {
        let mem = crate::env::MemEnv::new();
        assert_eq!(BulkIo::new(true, &mem).unwrap().mechanism(), "env");
        assert_eq!(
            BulkIo::new(false, &PosixEnv::new()).unwrap().mechanism(),
            "env"
        );
        assert_ne!(
            BulkIo::new(true, &PosixEnv::new()).unwrap().mechanism(),
            "env"
        );
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let io = pipes_io();
        let e = io
            .open_sequential(
                Path::new("/nonexistent/attune/table.sst"),
                READ_WINDOW_BYTES,
            )
            .err()
            .unwrap();
        assert!(e.to_string().contains("table.sst"), "{e}");
    }
}
