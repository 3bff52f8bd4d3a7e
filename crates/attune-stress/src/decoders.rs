//! One entry point per on-disk decoder of attune-kv, shared by the cargo-fuzz targets in `fuzz/`
//! and the property tests in `tests/integration/decoders.rs`: each takes arbitrary bytes, drives the decoder
//! (and the code that walks what it decoded) and must return, never panic, never loop without
//! bound and never allocate from an unchecked length field.
//!
//! Checksums would stop a fuzzer at the first byte, so where a format checksums a payload the
//! harness frames the fuzzed payload with a *valid* checksum (blocks, footers of an index
//! harness): the decoder behind the checksum is what is under test.
//!
//! Thread safety: pure functions; call them from any thread.

use attune_kv::env::{Env, MemEnv};
use attune_kv::internals::BlockCache;
use attune_kv::internals::InternalIterator;
use attune_kv::internals::LogReader;
use attune_kv::internals::{bloom_hash, Bloom};
use attune_kv::internals::{make_internal_key, ValueKind, MAX_SEQUENCE};
use attune_kv::internals::{put_fixed32, Reader};
use attune_kv::internals::{read_block, BlockHandle, Footer, FOOTER_BYTES, TABLE_FORMAT_VERSION};
use attune_kv::internals::{Block, BlockIter};
use attune_kv::internals::{Table, TableIter, TableProperties};
use attune_kv::internals::{VersionEdit, VersionSet};
use attune_kv::WriteBatch;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Steps any walk may take: inputs are small, so a decoder that needs more is looping.
const STEPS_MAX: usize = 100_000;

/// The decoders, by fuzz-target name.
pub const TARGETS: [&str; 15] = [
    "log_fragments",
    "wal_batch",
    "sstable_footer",
    "block",
    "index_block",
    "bloom_filter",
    "version_edit",
    "vlog_segment",
    "learned_model",
    "level_model",
    "plush_log_entry",
    "plush_recovery",
    "plush_payload_record",
    "io_model",
    "io_trace",
];

/// Runs the harness of `target` on `data`; false for an unknown target name.
pub fn run(target: &str, data: &[u8]) -> bool {
    match target {
        "log_fragments" => log_fragments(data),
        "wal_batch" => wal_batch(data),
        "sstable_footer" => sstable_footer(data),
        "block" => block(data),
        "index_block" => index_block(data),
        "bloom_filter" => bloom_filter(data),
        "version_edit" => version_edit(data),
        "vlog_segment" => vlog_segment(data),
        "learned_model" => learned_model(data),
        "level_model" => level_model(data),
        "plush_log_entry" => plush_log_entry(data),
        "plush_recovery" => plush_recovery(data),
        "plush_payload_record" => plush_payload_record(data),
        "io_model" => io_model(data),
        "io_trace" => io_trace(data),
        _ => return false,
    }
    true
}

/// WAL and manifest log fragments: read records until the end or an error.
pub fn log_fragments(data: &[u8]) {
    let mut r = LogReader::new(data, Path::new("/fuzz.log"));
    for _ in 0..STEPS_MAX {
        match r.next_record() {
            Ok(Some((off, rec))) => {
                assert!(off as usize <= data.len() && rec.len() <= data.len());
            }
            Ok(None) | Err(_) => return,
        }
    }
    panic!("log reader did not terminate");
}

/// The payload of a WAL record: a write batch (sequence, count, updates).
pub fn wal_batch(data: &[u8]) {
    if let Some((_seq, batch)) = WriteBatch::decode(data) {
        let mut n = 0usize;
        for item in batch.iter() {
            let (_kind, k, v) = item.expect("decode validated every update");
            assert!(k.len() + v.len() <= data.len());
            n += 1;
        }
        assert_eq!(n, batch.len(), "count disagrees with the updates");
    }
}

/// The 64-byte table footer (checksummed by itself: random bytes mostly fail the checksum, so
/// the fuzzed bytes are also tried with a valid checksum, magic and version in place).
pub fn sstable_footer(data: &[u8]) {
    let _ = Footer::decode(data, Path::new("/fuzz.sst"), 0);
    let mut buf = [0u8; FOOTER_BYTES];
    let n = data.len().min(48);
    buf[..n].copy_from_slice(&data[..n]);
    let version = data
        .get(48)
        .map_or(TABLE_FORMAT_VERSION, |&v| u32::from(v % 3));
    buf[48..52].copy_from_slice(&version.to_le_bytes());
    let crc = crc32c::crc32c(&buf[..52]);
    buf[52..56].copy_from_slice(&crc.to_le_bytes());
    buf[56..].copy_from_slice(b"ATTUNSST");
    if let Ok(f) = Footer::decode(&buf, Path::new("/fuzz.sst"), 0) {
        // Handles are plain numbers; a reader bounds them by the file size (see index_block).
        let _ = (f.filter, f.index, f.properties);
    }
}

/// A file of `body` followed by a valid trailer (compression `kind`, CRC32C).
fn framed(body: &[u8], kind: u8) -> Vec<u8> {
    let mut file = body.to_vec();
    let crc = crc32c::crc32c_append(crc32c::crc32c(body), &[kind]);
    file.push(kind);
    put_fixed32(&mut file, crc);
    file
}

fn mem_file(bytes: Vec<u8>) -> (MemEnv, PathBuf) {
    let env = MemEnv::new();
    let p = PathBuf::from("/fuzz.sst");
    if let Ok(mut f) = env.new_writable(&p) {
        let _ = f.append(&bytes);
    }
    (env, p)
}

fn walk_block(b: Block) {
    let b = Arc::new(b);
    let mut it = BlockIter::new(b.clone());
    it.seek_to_first();
    let mut n = 0;
    while it.valid() && n < STEPS_MAX {
        let _ = (it.key(), it.value());
        it.next();
        n += 1;
    }
    it.seek_to_last();
    let mut n = 0;
    while it.valid() && n < STEPS_MAX {
        it.prev();
        n += 1;
    }
    for target in [&b"a"[..], b"k0010", b"\xff\xff"] {
        it.seek(&make_internal_key(target, MAX_SEQUENCE, ValueKind::Value));
        let _ = it.valid() && !it.key().is_empty();
    }
    for i in 0..b.len().min(64) {
        let _ = b.entry(i);
        it.seek_to_position(i);
    }
    let _ = b.lower_bound(&make_internal_key(b"m", 1, ValueKind::Value));
}

/// A data block: the first byte picks the compression (none, LZ4, Zstd), the rest is the stored
/// body, framed with a valid trailer, read through `read_block` (decompression) and walked.
/// The raw bytes are also parsed directly as an uncompressed block.
pub fn block(data: &[u8]) {
    let path = Arc::new(PathBuf::from("/fuzz.sst"));
    if let Ok(b) = Block::new(data.to_vec(), path.clone(), 0) {
        walk_block(b);
    }
    let Some((&kind, body)) = data.split_first() else {
        return;
    };
    let (env, p) = mem_file(framed(body, kind % 4));
    let Ok(file) = env.open_random(&p) else {
        return;
    };
    let handle = BlockHandle {
        offset: 0,
        size: body.len() as u64,
    };
    if let Ok(contents) = read_block(file.as_ref(), handle, &p) {
        if let Ok(b) = Block::new(contents, path, 0) {
            walk_block(b);
        }
    }
}

/// The index block of a table: the fuzzed bytes become the index of an otherwise valid table
/// (valid properties block and footer, no filter), which is then opened, scanned both ways,
/// sought and probed by key and by position, so every handle the index yields is checked
/// against the file.
pub fn index_block(data: &[u8]) {
    let Some(table) = table_with_index(data) else {
        return;
    };
    for k in [&b"a"[..], b"k0010", b"zz"] {
        let _ = table.get(&make_internal_key(k, MAX_SEQUENCE, ValueKind::Value));
    }
    for pos in [0u64, 1, 2, 1000] {
        let _ = table.entry_at(pos);
    }
    let _ = table.verify();
    let mut it = TableIter::new(table, false);
    it.seek_to_first();
    let mut n = 0;
    while it.valid() && n < STEPS_MAX {
        it.next();
        n += 1;
    }
    it.seek_to_last();
    n = 0;
    while it.valid() && n < STEPS_MAX {
        it.prev();
        n += 1;
    }
    it.seek(&make_internal_key(b"k", MAX_SEQUENCE, ValueKind::Value));
    let _ = it.status();
}

/// Opens a table whose index block is `index` (valid trailer), with a valid properties block
/// claiming 3 entries in 1 data block, no filter and a valid footer; None if the open fails.
pub fn table_with_index(index: &[u8]) -> Option<Arc<Table>> {
    let data = index;
    let mut file = framed(data, 0);
    let index = BlockHandle {
        offset: 0,
        size: data.len() as u64,
    };
    let props_off = file.len() as u64;
    let props = TableProperties {
        num_entries: 3,
        num_data_blocks: 1,
        ..Default::default()
    }
    .encode();
    file.extend_from_slice(&framed(&props, 0));
    let footer = Footer {
        filter: BlockHandle::default(),
        index,
        properties: BlockHandle {
            offset: props_off,
            size: props.len() as u64,
        },
    };
    file.extend_from_slice(&footer.encode());
    let (env, p) = mem_file(file);
    let f = env.open_random(&p).ok()?;
    let cache = Arc::new(BlockCache::new(1 << 20));
    Table::open(f, p, 1, cache).ok().map(Arc::new)
}

/// A table's Bloom filter block: decoded, then probed with hashes of keys and of the input.
pub fn bloom_filter(data: &[u8]) {
    let f = Bloom::new(data.to_vec());
    let _ = f.bytes();
    for k in [&b""[..], b"a", b"key000001", data] {
        let _ = f.may_contain(bloom_hash(k));
    }
    let mut r = Reader::new(data);
    for _ in 0..64 {
        match r.fixed64() {
            Some(h) => {
                let _ = f.may_contain(h);
            }
            None => break,
        }
    }
}

/// A manifest version edit: decoded, re-encoded (must round-trip), then applied to an empty
/// version and applied again (deletions of what the first added).
pub fn version_edit(data: &[u8]) {
    let Some(e) = VersionEdit::decode(data) else {
        return;
    };
    assert_eq!(
        VersionEdit::decode(&e.encode()).as_ref(),
        Some(&e),
        "a decoded edit does not round-trip"
    );
    let vs = VersionSet::new(
        Arc::new(MemEnv::new()) as Arc<dyn Env>,
        PathBuf::from("/db"),
    );
    let manifest = Path::new("/db/MANIFEST-000001");
    if let Ok(v) = vs.current().apply(&e, manifest) {
        let _ = v.num_files();
        let mut undo = VersionEdit::default();
        for (level, f) in &e.new_files {
            undo.delete_file(*level, f.number);
        }
        if let Ok(v2) = v.apply(&undo, manifest) {
            let _ = v2.num_files();
        }
    }
}

/// A value-log segment image: the recovery scan (records until the first bad one, then the
/// torn-tail-or-damage decision), every record read through a pointer as a reader would (CRC,
/// lengths, key check), and pointer decoding of every 20-byte window.
pub fn vlog_segment(data: &[u8]) {
    use attune_kv::internals::{
        damaged_in_middle, record_at, BlobFile, BlobPointer, SegmentScanner, BLOB_POINTER_BYTES,
        SEGMENT_HEADER_BYTES,
    };
    let path = Path::new("/db/000007.vlog");
    let mut records = Vec::new();
    if let Ok(mut scan) = SegmentScanner::new(path, data) {
        for (off, len, k, v) in scan.by_ref().take(STEPS_MAX) {
            assert!(
                off + u64::from(len) <= data.len() as u64,
                "record past the end"
            );
            records.push((off, len, k.to_vec(), v.len()));
        }
        let _ = damaged_in_middle(data, scan.valid_len());
    }
    let _ = record_at(data, SEGMENT_HEADER_BYTES);
    for w in data.chunks(BLOB_POINTER_BYTES).take(64) {
        let _ = BlobPointer::decode(w);
    }
    // Read back through the reader path: what the scan accepted must read back whole.
    let env = MemEnv::new();
    if env.create_dir_all(Path::new("/db")).is_err() {
        return;
    }
    if let Ok(mut f) = env.new_writable(path) {
        if f.append(data).is_err() {
            return;
        }
    }
    let file = BlobFile::new(Arc::new(env) as Arc<dyn Env>, Path::new("/db"), 7);
    for (off, len, k, vlen) in records.iter().take(64) {
        let p = BlobPointer {
            file: 7,
            offset: *off,
            len: *len,
        };
        let v = file.read(&p, k);
        assert!(
            matches!(&v, Ok(v) if v.len() == *vlen),
            "a scanned record does not read back"
        );
        // A pointer one byte off is an error, never other data.
        let q = BlobPointer {
            offset: off + 1,
            ..p
        };
        let _ = file.read(&q, k);
    }
}

/// A persisted level model (`LEVEL-N.atlm`, `ATLV`): decoded; one that decodes must
/// round-trip and answer predictions with an in-bounds window.
pub fn level_model(data: &[u8]) {
    use attune_kv::internals::LevelModel;
    let p = Path::new("/fuzz/LEVEL-1.atlm");
    let Ok((level, numbers, m)) = LevelModel::decode(data, p) else {
        return;
    };
    let again = LevelModel::decode(&m.encode(level, &numbers), p);
    let (l2, n2, m2) =
        again.unwrap_or_else(|e| panic!("a decoded level model does not round-trip: {e}"));
    assert_eq!((l2, &n2, &m2.starts), (level, &numbers, &m.starts));
    for k in [&b""[..], b"a", &[0xff; 12]] {
        let w = m.index.predict(k);
        assert!(w.to_usize().start <= w.to_usize().end, "inverted window");
    }
}

/// A persisted learned-index model (attune-learn's `ATLM` format): decoded raw, and again with a
/// valid checksum trailer so that the structural checks behind it are reached; a model that
/// decodes must round-trip and answer predictions for a few keys with an in-bounds window.
pub fn learned_model(data: &[u8]) {
    use attune_learn::LearnedIndex;
    let check = |m: &LearnedIndex| {
        assert_eq!(
            LearnedIndex::decode(&m.encode()).as_ref().ok(),
            Some(m),
            "a decoded model does not round-trip"
        );
        for k in [&b""[..], b"a", b"user:00000700", &[0xff; 12]] {
            let w = m.predict(k);
            assert!(w.to_usize().start <= w.to_usize().end, "inverted window");
        }
    };
    if let Ok(m) = LearnedIndex::decode(data) {
        check(&m);
    }
    if data.len() >= 4 {
        let mut sealed = data.to_vec();
        let n = sealed.len() - 4;
        let crc = crc32c::crc32c(&sealed[..n]);
        sealed[n..].copy_from_slice(&crc.to_le_bytes());
        if let Ok(m) = LearnedIndex::decode(&sealed) {
            check(&m);
        }
    }
}

/// An I/O admission model weight file (attune-io's `ATIOMLP1` format): decoded raw, and again
/// with a valid CRC32C trailer so that the structural checks behind it are reached; a file that
/// decodes must round-trip, and a model that loads must answer a few inputs.
pub fn io_model(data: &[u8]) {
    use attune_io::model::{MlpFile, QuantizedMlp};
    let check = |f: &MlpFile| {
        let again = MlpFile::decode(&f.encode());
        assert!(again.is_ok(), "a decoded model file does not round-trip");
        if let Ok(q) = QuantizedMlp::new(f) {
            let n = q.inputs();
            for v in [0.0f32, 1.0, -3.5, 1e30, f32::NAN] {
                let x = vec![v; n];
                let _ = q.logit_q(&x);
                let _ = q.margin_q(&x);
                assert!(!q.score(&x).is_nan() || v.is_nan(), "score is NaN");
            }
        }
    };
    if let Ok(f) = MlpFile::decode(data) {
        check(&f);
    }
    if data.len() >= 4 {
        let mut sealed = data.to_vec();
        let n = sealed.len() - 4;
        let crc = crc32c::crc32c(&sealed[..n]);
        sealed[n..].copy_from_slice(&crc.to_le_bytes());
        if let Ok(f) = MlpFile::decode(&sealed) {
            check(&f);
        }
    }
}

/// A block trace in every format attune-io reads (MSR, CloudPhysics, Attune CSV and binary, and
/// the sniffed one): records or an error, never a panic; records come rebased to time 0.
pub fn io_trace(data: &[u8]) {
    use attune_io::trace::{read_trace, TraceFormat};
    for f in [
        TraceFormat::Msr,
        TraceFormat::CloudPhysics,
        TraceFormat::AttuneCsv,
        TraceFormat::Attune,
        TraceFormat::sniff(data),
    ] {
        if let Ok(v) = read_trace(data, f) {
            assert!(
                v.is_empty() || v.iter().any(|r| r.timestamp_ns == 0),
                "records not rebased"
            );
        }
    }
}

/// A Plush recovery-log entry and chunk header (attune-plush `log`): the first 8 bytes are the
/// chunk generation, the next 32 the entry's four words, the first 64 also a chunk header;
/// bytes 40–47 also a chunk header's acknowledged-tail word (it re-encodes when it decodes).
pub fn plush_log_entry(data: &[u8]) {
    use attune_plush::log::{
        decode_acked, decode_chunk_header, decode_entry, decode_entry_any, encode_acked,
        encode_entry, Acked,
    };
    let word = |i: usize| {
        let mut b = [0u8; 8];
        for (j, x) in b.iter_mut().enumerate() {
            *x = data.get(i * 8 + j).copied().unwrap_or(0);
        }
        u64::from_le_bytes(b)
    };
    let gen = word(0);
    let words = [word(1), word(2), word(3), word(4)];
    if let Some(e) = decode_entry(words, gen) {
        assert_eq!(
            encode_entry(&e, gen),
            words,
            "a decoded entry re-encodes to its words"
        );
    }
    // Under the tag the words carry (recovery reads damaged chunks' bodies so).
    if let Some((e, tag)) = decode_entry_any(words) {
        assert_eq!(
            encode_entry(&e, tag),
            words,
            "an entry re-encodes under its own tag"
        );
    }
    let _ = decode_chunk_header(std::array::from_fn(word));
    if let Acked::Slots(n) = decode_acked(word(5), gen) {
        assert_eq!(
            encode_acked(gen, n),
            word(5),
            "a decoded acknowledged tail re-encodes to its word"
        );
    }
}

/// A Plush payload-log record (attune-plush `payload`): the first 4 bytes are the segment
/// number, the rest the segment's bytes from a record's offset (64). A decoded record
/// re-encodes to the same bytes.
pub fn plush_payload_record(data: &[u8]) {
    use attune_plush::payload::{decode_record, encode_record};
    let Some((seg, body)) = data.split_first_chunk::<4>() else {
        return;
    };
    let seg = u32::from_le_bytes(*seg);
    if let Ok((k, v, _)) = decode_record(seg, 64, body) {
        let n = 16 + k.len() + v.len();
        assert_eq!(
            encode_record(seg, 64, &k, &v)[..n],
            body[..n],
            "a decoded record re-encodes to its bytes"
        );
    }
}

/// The geometry of the `plush_recovery` harness: 4 DRAM entries, fanout 4, one log partition
/// of four 8 KiB chunks.
fn plush_options() -> attune_plush::Options {
    attune_plush::Options {
        dram_entries_log2: 2,
        fanout_log2: 2,
        log_partitions: 1,
        log_chunk_bytes: 8192,
        log_chunks: 4,
        dram_filter_levels: 1,
        levels_max: 4,
        migration: attune_plush::Migration::Inline,
        ..attune_plush::Options::default()
    }
}

/// A whole Plush recovery over damaged files: a valid manifest, then the fuzzed bytes as the
/// recovery log (first byte even) or as level 1 (odd). Opening must return or fail with an
/// error, and an opened database must serve lookups, verify and take writes without a panic.
pub fn plush_recovery(data: &[u8]) {
    use attune_plush::{Plush, SimStorage};
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    let base = SimStorage::new(0, 1);
    let db = Plush::open_with(Box::new(base.clone()), plush_options())
        .expect("the harness's own database opens");
    for k in 0..40u64 {
        let _ = db.put(k, k + 1);
    }
    drop(db);
    let mut image = base.image_now();
    let name = if which % 2 == 0 {
        attune_plush::db::LOG_FILE
    } else {
        "level-01.plush"
    };
    if let Some(words) = image.get_mut(name) {
        for (i, w) in words.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            for (j, x) in b.iter_mut().enumerate() {
                *x = body.get(i * 8 + j).copied().unwrap_or(0);
            }
            *w = u64::from_le_bytes(b);
        }
    }
    if let Ok(db) = Plush::open_with(
        Box::new(SimStorage::from_image(image, 0, 2)),
        plush_options(),
    ) {
        for k in 0..64u64 {
            let _ = db.get(k);
        }
        let _ = db.verify();
        for k in 0..300u64 {
            if db.put(k, k).is_err() {
                break;
            }
        }
    }
}

/// Valid encodings for `target`: fuzzing and property tests start from (and mutate) these.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    use attune_kv::internals::BlockBuilder;
    use attune_kv::internals::FileMeta;
    let ikey = |k: &str, s: u64| make_internal_key(k.as_bytes(), s, ValueKind::Value);
    let block = |n: u32| {
        let mut b = BlockBuilder::default();
        for i in 0..n {
            b.add(
                &ikey(&format!("k{i:04}"), 7),
                format!("value{i}").as_bytes(),
            );
        }
        b.finish()
    };
    match target {
        "io_model" => {
            use attune_io::model::{InputKind, MlpFile};
            let dims = vec![11u32, 8, 4, 1];
            let mut k = 7u32;
            let layers = dims
                .windows(2)
                .map(|w| {
                    let weights = (0..w[0] * w[1])
                        .map(|_| {
                            k = k.wrapping_mul(1_103_515_245).wrapping_add(12345);
                            ((k >> 16) % 2000) as f32 / 1000.0 - 1.0
                        })
                        .collect();
                    (weights, vec![0.01; w[1] as usize])
                })
                .collect();
            let f = MlpFile {
                kind: InputKind::Heimdall,
                joint: 1,
                dims,
                scale_min: vec![0.0; 11],
                scale_max: vec![100.0; 11],
                layers,
                threshold: 0.4,
            };
            vec![f.encode()]
        }
        "io_trace" => vec![
            b"0.000 0 200626176 4096 0\n223.412 0 3159347200 36864 1\n".to_vec(),
            b"version,time,op,size,lbn\n1,10,2a,512,8\n1,10,28,4096,9\n".to_vec(),
        ],
        "plush_log_entry" => {
            let e = attune_plush::log::LogEntry {
                key: 42,
                value: 7,
                epoch: 3,
                seq: 9,
            };
            let mut b = 5u64.to_le_bytes().to_vec();
            for w in attune_plush::log::encode_entry(&e, 5) {
                b.extend_from_slice(&w.to_le_bytes());
            }
            vec![b]
        }
        "plush_payload_record" => {
            let mut b = 1u32.to_le_bytes().to_vec();
            b.extend(attune_plush::payload::encode_record(
                1,
                64,
                b"a key",
                b"a longer value",
            ));
            vec![b]
        }
        "plush_recovery" => {
            use attune_plush::{Plush, SimStorage};
            let sim = SimStorage::new(0, 1);
            if let Ok(db) = Plush::open_with(Box::new(sim.clone()), plush_options()) {
                for k in 0..300u64 {
                    let _ = db.put(k % 90, k);
                }
            }
            let image = sim.image_now();
            let bytes = |name: &str| {
                image
                    .get(name)
                    .map(|w| w.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
                    .unwrap_or_default()
            };
            let mut log = vec![0u8];
            log.extend(bytes(attune_plush::db::LOG_FILE));
            let mut level = vec![1u8];
            level.extend(bytes("level-01.plush"));
            vec![log, level]
        }
        "log_fragments" => {
            let env = MemEnv::new();
            let p = Path::new("/seed.log");
            let Ok(f) = env.new_writable(p) else {
                return Vec::new();
            };
            let mut w = attune_kv::internals::LogWriter::new(f);
            for i in 0..4u8 {
                let _ = w.add_record(&vec![i; 5 + usize::from(i) * 11]);
            }
            env.read_all(p).map(|d| vec![d]).unwrap_or_default()
        }
        "wal_batch" => {
            // sequence | count | (kind, key, value)…, as docs/formats/wal.md draws it.
            let mut b = 7u64.to_le_bytes().to_vec();
            b.extend_from_slice(&2u32.to_le_bytes());
            b.extend_from_slice(&[1, 1, b'a', 1, b'1', 0, 1, b'b']);
            vec![b]
        }
        "sstable_footer" => {
            let f = Footer {
                filter: BlockHandle {
                    offset: 0,
                    size: 10,
                },
                index: BlockHandle {
                    offset: 15,
                    size: 40,
                },
                properties: BlockHandle {
                    offset: 60,
                    size: 12,
                },
            };
            vec![f.encode()]
        }
        "block" => {
            let raw = block(20);
            let mut none = vec![0u8];
            none.extend_from_slice(&raw);
            let mut lz4 = vec![1u8];
            attune_kv::internals::put_varint64(&mut lz4, raw.len() as u64);
            lz4.extend_from_slice(&lz4_flex::block::compress(&raw));
            vec![raw, none, lz4]
        }
        "index_block" => {
            let mut b = BlockBuilder::default();
            for i in 0..3u64 {
                let mut v = Vec::new();
                BlockHandle {
                    offset: i * 100,
                    size: 90,
                }
                .encode_to(&mut v);
                attune_kv::internals::put_varint64(&mut v, i * 10);
                b.add(&ikey(&format!("k{i:04}"), 5), &v);
            }
            vec![b.finish()]
        }
        "bloom_filter" => {
            let hashes: Vec<u64> = (0..50u32).map(|i| bloom_hash(&i.to_le_bytes())).collect();
            vec![attune_kv::internals::build_bloom(&hashes, 10)]
        }
        "version_edit" => {
            let mut e = VersionEdit {
                log_number: Some(3),
                next_file_number: Some(9),
                last_sequence: Some(100),
                ..Default::default()
            };
            e.add_file(
                1,
                FileMeta {
                    number: 5,
                    size: 100,
                    smallest: ikey("a", 1),
                    largest: ikey("z", 2),
                    num_entries: 2,
                    table: Default::default(),
                },
            );
            e.delete_file(2, 4);
            e.compact_pointers.push((1, ikey("m", 3)));
            vec![e.encode()]
        }
        "vlog_segment" => {
            let env = MemEnv::new();
            let dir = Path::new("/seed");
            if env.create_dir_all(dir).is_err() {
                return Vec::new();
            }
            let Ok(mut w) = attune_kv::internals::VlogWriter::create(&env, dir, 3) else {
                return Vec::new();
            };
            for i in 0..5u8 {
                w.add(&[b'k', i], &vec![i; 40 * usize::from(i)]);
            }
            if w.sync().is_err() {
                return Vec::new();
            }
            env.read_all(&dir.join("000003.vlog"))
                .map(|d| vec![d])
                .unwrap_or_default()
        }
        "learned_model" => {
            let keys: Vec<Vec<u8>> = (0..500u64)
                .map(|i| format!("user:{:08}", i * i % 7919).into_bytes())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            attune_learn::LearnedIndex::train(&keys, 4)
                .map(|m| vec![m.encode()])
                .unwrap_or_default()
        }
        "level_model" => {
            let keys: Vec<[u8; 8]> = (0..600u64).map(|i| (i * 5).to_be_bytes()).collect();
            attune_learn::LearnedIndex::train(&keys, 4)
                .map(|index| {
                    let m = attune_kv::internals::LevelModel {
                        index,
                        starts: vec![0, 250, 600],
                    };
                    vec![m.encode(1, &[4, 6])]
                })
                .unwrap_or_default()
        }
        _ => Vec::new(),
    }
}
