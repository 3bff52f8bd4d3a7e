//! An arena-allocated skiplist for the memtable: one writer, many lock-free readers (LevelDB's
//! design). Entries (internal key + value) are copied into 8-byte-aligned arena chunks together
//! with their tower of next pointers, so an insert is one copy and no per-entry heap allocation,
//! and a search follows plain pointers with no epoch pinning or reference counting.
//!
//! Thread safety: `insert` must not run concurrently with another `insert` (the arena mutex makes
//! a violation safe but the list requires one writer; the engine's group-commit leader is the only
//! writer). Readers may run at any time: a node is fully written before it is published with a
//! release store, and readers load links with acquire. Nodes are never removed or moved while the
//! list lives, so a pointer read from the list stays valid as long as the list (readers hold an
//! `Arc` of the memtable that owns it).
//!
//! Node layout (8-byte aligned): `key_len u32 | value_len u32 | height u32 | flags u32 |
//! next[height] (AtomicPtr) | key | value`, where a value longer than [`INLINE_VALUE_MAX`]
//! bytes is replaced by a pointer (8 bytes, flag [`FLAG_VALUE_OUT`]) into a second arena that
//! holds only such values. A search reads headers, links and keys only; with values inline, a
//! memtable of 1 KiB values spread its nodes a kilobyte apart, so every step of a search was a
//! cache miss and, across 64 MiB, a TLB miss. Out of line, the nodes of a full memtable take a
//! few megabytes, which the last-level cache holds.

use crate::key::compare_internal;
use parking_lot::Mutex;
use std::cmp::Ordering;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};

/// Tallest tower. With branching 4, 12 levels index 4^12 ≈ 16 M entries efficiently.
pub const MAX_HEIGHT: usize = 12;
/// One in BRANCHING nodes of a level is promoted to the next.
const BRANCHING: u32 = 4;
/// Arena chunk size; entries above a quarter of it get a chunk of their own.
const CHUNK_BYTES: usize = 1 << 20;
const HEADER_BYTES: usize = 16;
/// Longest value stored inside its node: 48 bytes, so that a node of a short key and value still
/// fits in about one cache line; a longer value goes out of line (see the module doc), where
/// the pointer costs 8 bytes and one indirection when the value is read.
pub const INLINE_VALUE_MAX: usize = 48;
/// Node flag: the value bytes are out of line; the node holds their address.
const FLAG_VALUE_OUT: u32 = 1;

/// Bump allocation from 8-byte-aligned chunks that live as long as the list.
struct Bump {
    chunks: Vec<Box<[u64]>>,
    /// Free bytes at the end of the last chunk and where they start.
    free_ptr: *mut u8,
    free_bytes: usize,
}

struct Arena {
    /// Nodes: headers, towers, keys, short values.
    nodes: Bump,
    /// Values longer than [`INLINE_VALUE_MAX`].
    values: Bump,
    /// Scratch space for building an internal key during insert.
    scratch: Vec<u8>,
    rng: u64,
}

// SAFETY: `free_ptr` points into a chunk owned by `chunks`; the arena is only touched under the
// skiplist's mutex.
unsafe impl Send for Arena {}

impl Bump {
    fn new() -> Self {
        Bump {
            chunks: Vec::new(),
            free_ptr: std::ptr::null_mut(),
            free_bytes: 0,
        }
    }

    fn alloc(&mut self, bytes: usize) -> *mut u8 {
        let bytes = bytes.div_ceil(8) * 8;
        if bytes > self.free_bytes {
            if bytes > CHUNK_BYTES / 4 {
                let mut c = vec![0u64; bytes / 8].into_boxed_slice();
                let p = c.as_mut_ptr() as *mut u8;
                self.chunks.push(c);
                return p;
            }
            let mut c = vec![0u64; CHUNK_BYTES / 8].into_boxed_slice();
            self.free_ptr = c.as_mut_ptr() as *mut u8;
            self.free_bytes = CHUNK_BYTES;
            self.chunks.push(c);
        }
        let p = self.free_ptr;
        // SAFETY: `bytes <= free_bytes`, so the result stays inside the current chunk.
        self.free_ptr = unsafe { p.add(bytes) };
        self.free_bytes -= bytes;
        p
    }
}

impl Arena {
    fn random_height(&mut self) -> usize {
        let mut h = 1;
        loop {
            // xorshift64*
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
            if h >= MAX_HEIGHT || !((r >> 32) as u32).is_multiple_of(BRANCHING) {
                return h;
            }
            h += 1;
        }
    }
}

/// A node pointer; null is the end of a level.
type NodePtr = *mut u8;

/// Hints the CPU to load the first cache line of `node` (header, first links and, for short
/// keys, the key). A no-op for null and on targets without a prefetch instruction.
#[inline]
fn prefetch(node: NodePtr) {
    #[cfg(target_arch = "x86_64")]
    if !node.is_null() {
        // SAFETY: a prefetch never faults and reads nothing architecturally visible; `node`
        // points into the arena anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch(node as *const i8, std::arch::x86_64::_MM_HINT_T0)
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = node;
}

#[inline]
fn read_u32(node: NodePtr, off: usize) -> u32 {
    // SAFETY: callers pass a valid node; the header is 16 aligned bytes written before publishing.
    unsafe { (node.add(off) as *const u32).read() }
}

#[inline]
fn link(node: NodePtr, level: usize) -> &'static AtomicPtr<u8> {
    // SAFETY: level < the node's height (callers check), the tower starts 16 bytes in, 8-aligned;
    // the 'static lifetime is a lie bounded by the list's lifetime, never escaping this module.
    unsafe { &*(node.add(HEADER_BYTES + 8 * level) as *const AtomicPtr<u8>) }
}

#[inline]
fn height(node: NodePtr) -> usize {
    read_u32(node, 8) as usize
}

/// The internal key stored in a node.
#[inline]
pub(crate) fn node_key<'a>(node: NodePtr) -> &'a [u8] {
    let klen = read_u32(node, 0) as usize;
    let h = height(node);
    // SAFETY: the key bytes were written at this offset before the node was published.
    unsafe { std::slice::from_raw_parts(node.add(HEADER_BYTES + 8 * h), klen) }
}

/// The value stored in a node (inline or out of line).
#[inline]
pub(crate) fn node_value<'a>(node: NodePtr) -> &'a [u8] {
    let klen = read_u32(node, 0) as usize;
    let vlen = read_u32(node, 4) as usize;
    let h = height(node);
    // SAFETY: as for `node_key`; an out-of-line value's address was written after the key
    // before the node was published, and points at `vlen` bytes of the value arena, which
    // lives as long as the list.
    unsafe {
        let at = node.add(HEADER_BYTES + 8 * h + klen);
        if read_u32(node, 12) & FLAG_VALUE_OUT != 0 {
            let p = (at as *const *const u8).read_unaligned();
            std::slice::from_raw_parts(p, vlen)
        } else {
            std::slice::from_raw_parts(at, vlen)
        }
    }
}

/// The skiplist.
pub struct SkipList {
    head: NodePtr,
    max_height: AtomicUsize,
    arena: Mutex<Arena>,
    bytes: AtomicUsize,
}

// SAFETY: all shared mutation goes through atomics (links, max_height) or the arena mutex; node
// memory is immutable after publication and lives as long as the list.
unsafe impl Send for SkipList {}
unsafe impl Sync for SkipList {}

impl Default for SkipList {
    fn default() -> Self {
        Self::new()
    }
}

impl SkipList {
    pub fn new() -> Self {
        let mut arena = Arena {
            nodes: Bump::new(),
            values: Bump::new(),
            scratch: Vec::new(),
            rng: 0x9E37_79B9_7F4A_7C15,
        };
        let head = arena.nodes.alloc(HEADER_BYTES + 8 * MAX_HEIGHT);
        // SAFETY: fresh, zeroed, aligned memory of the right size.
        unsafe {
            (head as *mut u32).write(0);
            (head.add(4) as *mut u32).write(0);
            (head.add(8) as *mut u32).write(MAX_HEIGHT as u32);
        }
        SkipList {
            head,
            max_height: AtomicUsize::new(1),
            arena: Mutex::new(arena),
            bytes: AtomicUsize::new(0),
        }
    }

    /// Bytes of arena memory used.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
    }

    fn next(&self, node: NodePtr, level: usize) -> NodePtr {
        link(node, level).load(AtomicOrdering::Acquire)
    }

    /// First node >= key; fills `prev` with the last node < key per level when given.
    fn find_greater_or_equal(
        &self,
        key: &[u8],
        mut prev: Option<&mut [NodePtr; MAX_HEIGHT]>,
    ) -> NodePtr {
        let mut x = self.head;
        let mut level = self.max_height.load(AtomicOrdering::Acquire) - 1;
        loop {
            let n = self.next(x, level);
            if level > 0 {
                // The node the search visits next if `n` is not below `key`: start loading it
                // while `n` is compared, so the two cache misses overlap.
                prefetch(self.next(x, level - 1));
            }
            if !n.is_null() && compare_internal(node_key(n), key) == Ordering::Less {
                x = n;
            } else {
                if let Some(p) = prev.as_deref_mut() {
                    p[level] = x;
                }
                if level == 0 {
                    return n;
                }
                level -= 1;
            }
        }
    }

    /// The last node for which `before(node key)` holds (a prefix of the list), or null.
    fn find_last_where(&self, before: impl Fn(&[u8]) -> bool) -> NodePtr {
        let mut x = self.head;
        let mut level = self.max_height.load(AtomicOrdering::Acquire) - 1;
        loop {
            let n = self.next(x, level);
            if !n.is_null() && before(node_key(n)) {
                x = n;
            } else if level == 0 {
                return if x == self.head {
                    std::ptr::null_mut()
                } else {
                    x
                };
            } else {
                level -= 1;
            }
        }
    }

    /// Last node < key, or null.
    pub fn find_less_than(&self, key: &[u8]) -> NodePtr {
        self.find_last_where(|k| compare_internal(k, key) == Ordering::Less)
    }

    /// Last node, or null.
    pub fn find_last(&self) -> NodePtr {
        self.find_last_where(|_| true)
    }

    /// First node, or null.
    pub fn first(&self) -> NodePtr {
        self.next(self.head, 0)
    }

    /// First node >= key, or null.
    pub fn seek(&self, key: &[u8]) -> NodePtr {
        self.find_greater_or_equal(key, None)
    }

    /// The node after `node` on level 0, or null.
    pub fn successor(&self, node: NodePtr) -> NodePtr {
        self.next(node, 0)
    }

    /// Inserts an entry whose key is not in the list yet. One writer at a time.
    #[cfg(test)]
    pub fn insert(&self, key: &[u8], value: &[u8]) {
        self.insert_parts(key, &[], value)
    }

    /// Inserts the entry with key `key_prefix ‖ key_suffix` (a user key and its tag, without
    /// building the internal key on the heap).
    pub fn insert_parts(&self, key_prefix: &[u8], key_suffix: &[u8], value: &[u8]) {
        let mut guard = self.arena.lock();
        let arena = &mut *guard;
        let mut scratch = std::mem::take(&mut arena.scratch);
        scratch.clear();
        scratch.extend_from_slice(key_prefix);
        scratch.extend_from_slice(key_suffix);
        self.insert_locked(arena, &scratch, value);
        arena.scratch = scratch;
    }

    fn insert_locked(&self, arena: &mut Arena, key: &[u8], value: &[u8]) {
        let mut prev = [std::ptr::null_mut(); MAX_HEIGHT];
        let found = self.find_greater_or_equal(key, Some(&mut prev));
        assert!(
            found.is_null() || compare_internal(node_key(found), key) != Ordering::Equal,
            "duplicate internal key inserted into the memtable"
        );
        let h = arena.random_height();
        let max = self.max_height.load(AtomicOrdering::Relaxed);
        if h > max {
            for p in prev.iter_mut().take(h).skip(max) {
                *p = self.head;
            }
            // Readers that see the new height before the node find null links from head: fine.
            self.max_height.store(h, AtomicOrdering::Release);
        }
        let klen = u32::try_from(key.len()).unwrap_or(u32::MAX);
        let vlen = u32::try_from(value.len()).unwrap_or(u32::MAX);
        let out = value.len() > INLINE_VALUE_MAX;
        let (in_node, out_bytes) = if out {
            (8, value.len().div_ceil(8) * 8)
        } else {
            (value.len(), 0)
        };
        let size = HEADER_BYTES + 8 * h + key.len() + in_node;
        let node = arena.nodes.alloc(size);
        let stored = if out {
            arena.values.alloc(value.len())
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: `node` is fresh aligned arena memory of `size` bytes and `stored` (when out
        // of line) of `value.len()` bytes, both unreachable by readers until the release stores
        // below publish the node.
        unsafe {
            (node as *mut u32).write(klen);
            (node.add(4) as *mut u32).write(vlen);
            (node.add(8) as *mut u32).write(h as u32);
            (node.add(12) as *mut u32).write(if out { FLAG_VALUE_OUT } else { 0 });
            let data = node.add(HEADER_BYTES + 8 * h);
            std::ptr::copy_nonoverlapping(key.as_ptr(), data, key.len());
            if out {
                std::ptr::copy_nonoverlapping(value.as_ptr(), stored, value.len());
                (data.add(key.len()) as *mut *const u8).write_unaligned(stored);
            } else {
                std::ptr::copy_nonoverlapping(value.as_ptr(), data.add(key.len()), value.len());
            }
        }
        for (level, p) in prev.iter().enumerate().take(h) {
            link(node, level).store(
                link(*p, level).load(AtomicOrdering::Relaxed),
                AtomicOrdering::Relaxed,
            );
            link(*p, level).store(node, AtomicOrdering::Release);
        }
        self.bytes
            .fetch_add(size.div_ceil(8) * 8 + out_bytes, AtomicOrdering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};
    use std::sync::Arc;

    #[test]
    fn inserts_in_random_order_come_out_sorted() {
        let l = SkipList::new();
        let mut keys: Vec<u64> = (0..5000).map(|i| (i * 7919) % 5003).collect();
        keys.dedup();
        for &k in &keys {
            l.insert(
                &make_internal_key(&k.to_be_bytes(), 1, ValueKind::Value),
                &k.to_le_bytes(),
            );
        }
        let mut n = l.first();
        let mut prev: Option<Vec<u8>> = None;
        let mut count = 0;
        while !n.is_null() {
            if let Some(p) = &prev {
                assert_eq!(compare_internal(p, node_key(n)), Ordering::Less);
            }
            prev = Some(node_key(n).to_vec());
            count += 1;
            n = l.successor(n);
        }
        assert_eq!(count, keys.len());
        let probe = make_internal_key(&100u64.to_be_bytes(), 5, ValueKind::Value);
        assert_eq!(node_value(l.seek(&probe)), &100u64.to_le_bytes());
        let last = l.find_last();
        assert_eq!(crate::key::user_key(node_key(last)), &5002u64.to_be_bytes());
        assert!(l.find_less_than(node_key(l.first())).is_null());
    }

    #[test]
    fn readers_run_while_the_writer_inserts() {
        let l = Arc::new(SkipList::new());
        let writer = {
            let l = l.clone();
            std::thread::spawn(move || {
                for i in 0..20_000u64 {
                    let k = make_internal_key(
                        &(i * 2654435761 % 1_000_003).to_be_bytes(),
                        i + 1,
                        ValueKind::Value,
                    );
                    l.insert(&k, &[7u8; 40]);
                }
            })
        };
        for _ in 0..50 {
            let mut n = l.first();
            let mut prev: Option<&[u8]> = None;
            while !n.is_null() {
                let k = node_key(n);
                if let Some(p) = prev {
                    assert_eq!(compare_internal(p, k), Ordering::Less);
                }
                assert_eq!(node_value(n), &[7u8; 40]);
                prev = Some(k);
                n = l.successor(n);
            }
        }
        writer.join().unwrap();
    }

    #[test]
    fn short_values_stay_in_the_node_and_long_ones_go_out_of_line() {
        let l = SkipList::new();
        let lens = [0, 1, INLINE_VALUE_MAX, INLINE_VALUE_MAX + 1, 1000, 4097];
        for (i, &n) in lens.iter().enumerate() {
            let v: Vec<u8> = (0..n).map(|j| (i * 31 + j) as u8).collect();
            l.insert(&make_internal_key(&[i as u8], 1, ValueKind::Value), &v);
        }
        let mut n = l.first();
        for (i, &len) in lens.iter().enumerate() {
            let want: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8).collect();
            assert_eq!(crate::key::user_key(node_key(n)), &[i as u8]);
            assert_eq!(node_value(n), &want[..], "value of {len} bytes");
            let out = read_u32(n, 12) & FLAG_VALUE_OUT != 0;
            assert_eq!(out, len > INLINE_VALUE_MAX, "value of {len} bytes");
            n = l.successor(n);
        }
        assert!(n.is_null());
        // Accounting covers the values wherever they live.
        assert!(l.memory_bytes() >= lens.iter().sum::<usize>());
    }

    #[test]
    fn large_entries_get_their_own_chunk() {
        let l = SkipList::new();
        let big = vec![3u8; CHUNK_BYTES];
        l.insert(&make_internal_key(b"big", 1, ValueKind::Value), &big);
        l.insert(&make_internal_key(b"a", 2, ValueKind::Value), b"x");
        assert_eq!(
            node_value(l.seek(&make_internal_key(b"big", 9, ValueKind::Value))).len(),
            CHUNK_BYTES
        );
        assert!(l.memory_bytes() > CHUNK_BYTES);
    }
}
