//! [`LearnedIndex`]: the per-file learned index an engine keeps beside (or instead of) a block
//! index — a [`KeyMapper`] for byte keys plus a [`PlrModel`] over the mapped keys — and its
//! one-pass builder.
//!
//! An engine builds it while writing or after writing a file (keys in file order), persists it
//! with [`LearnedIndex::encode`] (format: docs/formats/learned-model.md) and, on a lookup, turns
//! `predict(key)` into the byte range of fixed-size records to load and search.
//!
//! Thread-safety: the builder is single-owner; a built index is immutable (`Send + Sync`) and can
//! be shared by reference or `Arc` among reader threads.

use crate::error::Result;
use crate::keymap::KeyMapper;
use crate::plr::{PlrBuilder, PlrFit, PlrModel, PosRange, Quality, PLR_FIT_DEFAULT};

/// A learned index over one sorted file of byte keys.
#[derive(Clone, Debug, PartialEq)]
pub struct LearnedIndex {
    mapper: KeyMapper,
    model: PlrModel,
}

impl LearnedIndex {
    /// A builder for a file whose smallest key is `first` and largest is `last` (the mapper
    /// strips their common prefix), with error bound `delta`.
    pub fn builder(first: &[u8], last: &[u8], delta: u32) -> Result<LearnedIndexBuilder> {
        Self::builder_with_fit(first, last, delta, PLR_FIT_DEFAULT)
    }

    /// As [`builder`](Self::builder), with an explicit fit.
    pub fn builder_with_fit(
        first: &[u8],
        last: &[u8],
        delta: u32,
        fit: PlrFit,
    ) -> Result<LearnedIndexBuilder> {
        Ok(LearnedIndexBuilder {
            mapper: KeyMapper::for_range(first, last),
            plr: PlrBuilder::with_fit(delta, fit)?,
        })
    }

    /// A builder with an explicit key mapping (e.g. [`KeyMapper::for_keys`]'s radix form).
    pub fn builder_with_mapper(mapper: KeyMapper, delta: u32) -> Result<LearnedIndexBuilder> {
        Ok(LearnedIndexBuilder {
            mapper,
            plr: PlrBuilder::with_fit(delta, PLR_FIT_DEFAULT)?,
        })
    }

    /// Trains over sorted byte keys (bytewise order) in one call, with the default fit.
    pub fn train<K: AsRef<[u8]>>(keys: &[K], delta: u32) -> Result<Self> {
        Self::train_with(keys, delta, PLR_FIT_DEFAULT)
    }

    /// Trains over sorted byte keys (bytewise order) in one call, with fit `fit`.
    pub fn train_with<K: AsRef<[u8]>>(keys: &[K], delta: u32, fit: PlrFit) -> Result<Self> {
        let (first, last) = match (keys.first(), keys.last()) {
            (Some(f), Some(l)) => (f.as_ref(), l.as_ref()),
            _ => (&[][..], &[][..]),
        };
        let mut b = Self::builder_with_fit(first, last, delta, fit)?;
        for k in keys {
            b.push(k.as_ref())?;
        }
        Ok(b.finish())
    }

    /// Wraps a model over 8-byte big-endian integer keys (identity mapping).
    pub fn from_u64_model(model: PlrModel) -> Self {
        Self {
            mapper: KeyMapper::identity(),
            model,
        }
    }

    pub(crate) fn from_parts(mapper: KeyMapper, model: PlrModel) -> Self {
        Self { mapper, model }
    }

    /// The window of positions `[lo, hi)` to search for `key`: it holds every position of `key`
    /// if present, and the position of the first key `>= key` in any case (so a seek can search
    /// only the window).
    #[inline]
    pub fn predict(&self, key: &[u8]) -> PosRange {
        self.model.predict(self.mapper.map(key))
    }

    /// The key mapping.
    pub fn mapper(&self) -> &KeyMapper {
        &self.mapper
    }

    /// The integer model.
    pub fn model(&self) -> &PlrModel {
        &self.model
    }

    /// Training-time quality (see [`Quality::is_useful`] for the skip rule).
    pub fn quality(&self) -> Quality {
        self.model.quality()
    }

    /// Bytes in memory (model plus mapper prefix).
    pub fn size_bytes(&self) -> usize {
        self.model.size_bytes() + self.mapper.size_bytes()
    }
}

/// One-pass builder of a [`LearnedIndex`]: push the file's keys in order, then finish.
#[derive(Debug)]
pub struct LearnedIndexBuilder {
    mapper: KeyMapper,
    plr: PlrBuilder,
}

impl LearnedIndexBuilder {
    /// Adds the key at the next position. Keys must be sorted bytewise; a violation that is
    /// visible after mapping is an error (equal mapped values cannot be checked and are fine).
    #[inline]
    pub fn push(&mut self, key: &[u8]) -> Result<()> {
        self.plr.push(self.mapper.map(key))
    }

    /// Keys pushed so far.
    pub fn len(&self) -> u64 {
        self.plr.len()
    }

    /// True if no key was pushed.
    pub fn is_empty(&self) -> bool {
        self.plr.is_empty()
    }

    /// The finished index.
    pub fn finish(self) -> LearnedIndex {
        LearnedIndex {
            mapper: self.mapper,
            model: self.plr.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every key of `keys` (sorted, unique or not) lies in its window, and a lower-bound search
    /// inside the window of any probe equals the global lower bound.
    fn check_bytes(keys: &[Vec<u8>], idx: &LearnedIndex, probes: &[Vec<u8>]) {
        for q in keys.iter().chain(probes) {
            let r = idx.predict(q).to_usize();
            let global = keys.partition_point(|k| k < q);
            let end = keys.partition_point(|k| k <= q);
            assert!(
                r.start <= global && end <= r.end && r.end <= keys.len(),
                "key {q:?}: window {r:?} must hold [{global}, {end})"
            );
            let local = r.start + keys[r.start..r.end].partition_point(|k| k < q);
            assert_eq!(local, global, "key {q:?}");
        }
    }

    #[test]
    fn string_keys_with_a_long_shared_prefix_are_all_found() {
        // 500 keys share 48 bytes, but the file also holds "a" and "z", so the file's common
        // prefix is empty and all 500 collapse to the mapped value of "pppppppp": the index
        // degrades to searching their whole run, and reports that it is not useful.
        let mut keys: Vec<Vec<u8>> = vec![b"a".to_vec()];
        keys.extend((0..500u32).map(|i| {
            let mut k = vec![b'p'; 40];
            k.extend_from_slice(b"samesame");
            k.extend_from_slice(format!("{i:06}").as_bytes());
            k
        }));
        keys.push(b"z".to_vec());
        let idx = LearnedIndex::train(&keys, 8).unwrap();
        check_bytes(
            &keys,
            &idx,
            &[b"b".to_vec(), b"q".to_vec(), vec![b'p'; 41], vec![]],
        );
        assert!(!idx.quality().is_useful());
        assert_eq!(idx.quality().distinct_keys, 3);
        assert_eq!(idx.quality().max_run, 500);
        assert!(idx.predict(&keys[250]).len() >= 500);
    }

    #[test]
    fn sixteen_byte_integer_keys_keep_a_tight_window() {
        let keys: Vec<Vec<u8>> = (0..10_000u64)
            .map(|i| {
                let mut k = (i * 3 + 1_000_000).to_be_bytes().to_vec();
                k.extend_from_slice(&[0; 8]);
                k
            })
            .collect();
        let idx = LearnedIndex::train(&keys, 8).unwrap();
        check_bytes(&keys, &idx, &[]);
        assert!(idx.quality().is_useful());
        assert_eq!(idx.model().segment_count(), 1);
        assert!(idx.predict(&keys[5000]).len() <= 18);
    }

    #[test]
    fn empty_index_predicts_empty_windows() {
        let idx = LearnedIndex::train::<Vec<u8>>(&[], 8).unwrap();
        assert!(idx.predict(b"x").is_empty());
    }

    fn bytes_key() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop::sample::select(vec![0u8, 1, 2, 0x80, 0xfe, 0xff]),
            0..20,
        )
    }

    fn bytes_keyset() -> impl Strategy<Value = Vec<Vec<u8>>> {
        let plain = prop::collection::vec(bytes_key(), 0..200);
        // A common prefix of up to 30 bytes in front of short suffixes.
        let prefixed = (
            prop::collection::vec(any::<u8>(), 0..30),
            prop::collection::vec(bytes_key(), 0..200),
        )
            .prop_map(|(p, v)| {
                v.into_iter()
                    .map(|s| {
                        let mut k = p.clone();
                        k.extend(s);
                        k
                    })
                    .collect()
            });
        prop_oneof![plain, prefixed].prop_map(|mut v: Vec<Vec<u8>>| {
            v.sort();
            v.dedup(); // an SSTable holds each user key once (duplicates after *mapping* remain)
            v
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn every_byte_key_lies_in_its_window(keys in bytes_keyset(),
                                             probes in prop::collection::vec(bytes_key(), 0..20),
                                             delta in 1u32..20) {
            for fit in [PlrFit::Cone, PlrFit::Pivot] {
                let idx = LearnedIndex::train_with(&keys, delta, fit).unwrap();
                check_bytes(&keys, &idx, &probes);
            }
        }
    }
}
