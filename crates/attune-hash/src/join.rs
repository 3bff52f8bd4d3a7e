//! The canonical PK-FK hash join (seed 004 §3.6.1) over a [`VipMap`].
//!
//! Build: insert every primary key of `R` (row id as the value) into a table. Probe: look up
//! every foreign key of `S` and materialise `(r_row, s_row)` pairs for the matches. With
//! [`JoinMode::Vip`] the probe learns for the first `N_L = min(|R|, |S| / 61)` probes (the
//! learning budget that keeps `N_L : N_D = 1 : 60` when the sizes are known in advance) and then
//! runs as a plain table.
//!
//! Thread-safety: a [`JoinTable`] is owned by one thread; `probe` takes `&mut self`.

use crate::{HashError, Schedule, VipConfig, VipMap, VipStats};

/// Largest relation a join accepts: row ids in the output are `u32`.
pub const MAX_ROWS: usize = u32::MAX as usize;

/// Fewest probe rows per build row for which a VIP probe gathers the learned hot entries at the
/// front of the arena when learning ends (default 2): gathering is a few passes over the build
/// table, which a short probe side (a join whose input a filter thinned) does not repay.
pub const GATHER_MIN_PROBE_RATIO: usize = 2;

/// Whether the probe phase learns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinMode {
    /// Plain chained hashing.
    Default,
    /// Learn for `min(|R|, |S| / 61)` probes, then plain.
    Vip,
}

/// The learning budget of a VIP probe: `min(|R|, |S| / 61)` probes.
pub fn learn_budget(build_rows: usize, probe_rows: usize) -> u64 {
    (build_rows as u64).min(probe_rows as u64 / 61)
}

/// A built hash table over the primary keys of `R`.
#[derive(Debug, Clone)]
pub struct JoinTable {
    map: VipMap<u64, u32>,
    build_rows: usize,
}

impl JoinTable {
    /// Builds the table from the primary-key column of `R` (row `i` has key `r_keys[i]`).
    /// The bucket array is sized for `|R|` up front (see [`JoinTable::with_capacity`]).
    pub fn build(r_keys: &[u64]) -> Result<JoinTable, HashError> {
        let mut table = JoinTable::with_capacity(r_keys.len())?;
        table.build_rows(r_keys, 0)?;
        Ok(table)
    }

    /// An empty build table (fill it with [`JoinTable::build_rows`]).
    pub fn new() -> Result<JoinTable, HashError> {
        Ok(JoinTable {
            map: VipMap::new(VipConfig::chained())?,
            build_rows: 0,
        })
    }

    /// An empty build table sized for `rows` rows, as a planner that knows `|R|` sizes it: the
    /// bucket count that growth would end at (the smallest power of two keeping the load factor
    /// at most `load_factor_max`, 1.5), so the build never rehashes and the probe sees the same
    /// chains as a table grown row by row.
    pub fn with_capacity(rows: usize) -> Result<JoinTable, HashError> {
        let config = VipConfig::chained();
        let want = (rows as f64 / config.load_factor_max).ceil() as usize;
        let buckets = want
            .max(crate::map::MIN_BUCKETS)
            .checked_next_power_of_two()
            .unwrap_or(crate::map::MAX_BUCKETS)
            .min(crate::map::MAX_BUCKETS);
        let mut map = VipMap::with_buckets(buckets, config)?;
        map.reserve(rows);
        Ok(JoinTable { map, build_rows: 0 })
    }

    /// Inserts rows `first_row ..` of `R` (their primary keys are `r_keys`); lets a caller
    /// build in pieces. A key already present is [`HashError::DuplicatePrimaryKey`].
    pub fn build_rows(&mut self, r_keys: &[u64], first_row: usize) -> Result<(), HashError> {
        let end = first_row.saturating_add(r_keys.len());
        if end > MAX_ROWS {
            return Err(HashError::TooManyRows {
                rows: end,
                max: MAX_ROWS,
            });
        }
        self.map.reserve(r_keys.len());
        for (i, &key) in r_keys.iter().enumerate() {
            let row = first_row + i;
            if let Some(first) = self.map.try_insert(key, row as u32)? {
                // Restore the first row's id before reporting the duplicate.
                self.map.try_insert(key, first)?;
                return Err(HashError::DuplicatePrimaryKey {
                    key,
                    first: first as usize,
                    second: row,
                });
            }
        }
        self.build_rows = self.build_rows.max(end);
        Ok(())
    }

    /// Probes with the foreign-key column of `S`, appending `(r_row, s_row)` for each match to
    /// `out`. Returns the number of matches. Same as [`JoinTable::begin_probe`] followed by one
    /// [`JoinTable::probe_rows`] over all of `S`.
    pub fn probe(
        &mut self,
        s_keys: &[u64],
        mode: JoinMode,
        out: &mut Vec<(u32, u32)>,
    ) -> Result<usize, HashError> {
        self.begin_probe(s_keys.len(), mode)?;
        self.probe_rows(s_keys, 0, out)
    }

    /// Starts a probe of `probe_rows` rows in total (fed in pieces with
    /// [`JoinTable::probe_rows`]); sets the learning budget from |R| and |S|.
    pub fn begin_probe(&mut self, probe_rows: usize, mode: JoinMode) -> Result<(), HashError> {
        if probe_rows > MAX_ROWS {
            return Err(HashError::TooManyRows {
                rows: probe_rows,
                max: MAX_ROWS,
            });
        }
        let schedule = match mode {
            JoinMode::Default => Schedule::Off,
            JoinMode::Vip => Schedule::LearnOnce(learn_budget(self.build_rows, probe_rows)),
        };
        // Gathering the hot entries costs passes over the whole arena; only a probe side of at
        // least GATHER_MIN_PROBE_RATIO times the build side repays it.
        self.map
            .set_gather_hot(probe_rows >= GATHER_MIN_PROBE_RATIO.saturating_mul(self.build_rows));
        self.map.set_schedule(schedule);
        Ok(())
    }

    /// Probes rows `first_row ..` of `S` (their keys are `s_keys`), appending matches to `out`.
    pub fn probe_rows(
        &mut self,
        s_keys: &[u64],
        first_row: usize,
        out: &mut Vec<(u32, u32)>,
    ) -> Result<usize, HashError> {
        let end = first_row.saturating_add(s_keys.len());
        if end > MAX_ROWS {
            return Err(HashError::TooManyRows {
                rows: end,
                max: MAX_ROWS,
            });
        }
        let before = out.len();
        for (i, key) in s_keys.iter().enumerate() {
            if let Some(&r_row) = self.map.get(key) {
                out.push((r_row, (first_row + i) as u32));
            }
        }
        Ok(out.len() - before)
    }

    /// Counters of the underlying table (displacement, swaps, learn fetches).
    pub fn stats(&self) -> VipStats {
        self.map.stats()
    }

    /// Load factor of the build table.
    pub fn load_factor(&self) -> f64 {
        self.map.load_factor()
    }

    /// Number of buckets of the build table.
    pub fn buckets(&self) -> usize {
        self.map.buckets()
    }
}

/// Builds on `r_keys`, probes with `s_keys`, returns the `(r_row, s_row)` match pairs.
pub fn hash_join(
    r_keys: &[u64],
    s_keys: &[u64],
    mode: JoinMode,
) -> Result<Vec<(u32, u32)>, HashError> {
    let mut table = JoinTable::build(r_keys)?;
    let mut out = Vec::with_capacity(s_keys.len());
    table.probe(s_keys, mode, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_finds_every_match_in_both_modes() {
        let r: Vec<u64> = (0..1000u64).map(|i| i * 7 + 3).collect();
        let s: Vec<u64> = (0..20_000u64).map(|i| (i * i) % 9000).collect();
        let mut want: Vec<(u32, u32)> = Vec::new();
        for (si, k) in s.iter().enumerate() {
            if let Some(ri) = r.iter().position(|x| x == k) {
                want.push((ri as u32, si as u32));
            }
        }
        assert!(!want.is_empty());
        for mode in [JoinMode::Default, JoinMode::Vip] {
            let got = hash_join(&r, &s, mode).expect("join");
            assert_eq!(got, want, "{mode:?}");
        }
    }

    #[test]
    fn probing_in_pieces_equals_probing_at_once() {
        let r: Vec<u64> = (0..500u64).map(|i| i * 3).collect();
        let s: Vec<u64> = (0..30_000u64).map(|i| (i * 7919) % 1600).collect();
        let whole = hash_join(&r, &s, JoinMode::Vip).expect("join");
        let mut t = JoinTable::build(&r).expect("build");
        t.begin_probe(s.len(), JoinMode::Vip).expect("begin");
        let mut out = Vec::new();
        for (i, piece) in s.chunks(777).enumerate() {
            t.probe_rows(piece, i * 777, &mut out).expect("probe");
        }
        assert_eq!(out, whole);
        assert_eq!(t.stats().learn_fetches, learn_budget(500, 30_000));
    }

    #[test]
    fn a_presized_build_has_the_buckets_growth_ends_at() {
        for n in [0usize, 1, 24, 25, 1000, 98_304, 98_305, 1_500_000] {
            let keys: Vec<u64> = (1..=n as u64).collect();
            let presized = JoinTable::build(&keys).expect("test setup");
            let mut grown = JoinTable::new().expect("test setup");
            grown.build_rows(&keys, 0).expect("test setup");
            assert_eq!(presized.buckets(), grown.buckets(), "n = {n}");
        }
    }

    #[test]
    fn a_short_probe_side_does_not_gather() {
        let r: Vec<u64> = (1..=70_000).collect();
        let hot: Vec<u64> = (0..200_000u64).map(|i| 1 + i % 64).collect();
        let mut short = JoinTable::build(&r).expect("test setup");
        let mut out = Vec::new();
        short
            .probe(&hot[..100_000], JoinMode::Vip, &mut out)
            .expect("test setup");
        assert_eq!(short.stats().gathers, 0);
        let mut long = JoinTable::build(&r).expect("test setup");
        long.probe(&hot, JoinMode::Vip, &mut out)
            .expect("test setup");
        assert_eq!(long.stats().gathers, 1);
    }

    #[test]
    fn duplicate_primary_key_is_an_error() {
        let err = hash_join(&[5, 6, 5], &[5], JoinMode::Default).expect_err("duplicate");
        assert_eq!(
            err,
            HashError::DuplicatePrimaryKey {
                key: 5,
                first: 0,
                second: 2
            }
        );
    }

    #[test]
    fn vip_probe_learns_for_exactly_its_budget() {
        let r: Vec<u64> = (0..100u64).collect();
        let s: Vec<u64> = (0..6100u64).map(|i| i % 100).collect();
        let mut t = JoinTable::build(&r).expect("build");
        let mut out = Vec::new();
        t.probe(&s, JoinMode::Vip, &mut out).expect("probe");
        assert_eq!(t.stats().learn_fetches, learn_budget(100, 6100));
        assert_eq!(learn_budget(100, 6100), 100);
        assert_eq!(out.len(), 6100);
    }
}
