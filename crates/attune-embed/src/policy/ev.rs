//! EVCache's adaptive group-score policies: EV-ARC and EV-CAR (EVStore §2.4.3).
//!
//! Both keep ARC's / CAR's structure (a recency side R, a frequency side F, their ghosts and the
//! adaptive target `p` for |R|) and change only the frequency side:
//!
//! * **EV-ARC**: F is EV-LFU's score sets (one list per group score `0..=N`, max-based scores,
//!   eviction of the least recently used key of the lowest score, perfect-page flush at 0.95 of
//!   the capacity). Flushed perfect pages are not evicted: they move to the most recent end of R
//!   with score 0, and must earn their way back. Ghost budgets are equal:
//!   |R| + |R-ghost| ≤ c and |F| + |F-ghost| ≤ c (the source's "|R| + |R-ghost| = |F| + |F-ghost|").
//! * **EV-CAR**: F is a CLOCK whose reference value R is the group score instead of one bit. The
//!   hand evicts a page whose R is 0; a page with R > 0 is challenged by the incoming key: if the
//!   incoming group score is at least R, the page gets a second chance (R := 0); otherwise R drops
//!   by the *decrement*, which starts at 1 and grows by 1 after every `c / N` pages examined
//!   (progressive decrement), so one rotation always finds a victim (O(c) worst case). The
//!   listing (l. 784–794) only decrements when the result would be ≤ 0 and reads the recency
//!   clock's hand in the frequency branch; we follow the prose (l. 733): decrement whenever the
//!   page's score is above the incoming one, on F's own hand.
//!
//! Keys carry their score in the list node's `aux` word (EV-CAR's recency side also keeps a
//! reference bit there, see [`EvCar`]). Thread-safety: owned by one thread (`Send`).

use super::{map, EvConfig, Map, Policy, TieBreak};
use crate::lists::Lists;

/// `max(1, ⌊rate · perfect⌋)` pages per flush (EV-LFU's rule, shared).
fn flush_count(rate: f64, perfect: usize) -> usize {
    ((rate * perfect as f64) as usize).clamp(1, perfect.max(1))
}

// EV-ARC's lists: R, its ghost, F's ghost, then F's score sets F0 + s for s in 0..=N.
const R: usize = 0;
const RG: usize = 1;
const FG: usize = 2;
const F0: usize = 3;

/// EV-ARC: ARC whose frequency list is EV-LFU's score sets. See the module doc.
pub struct EvArc {
    cap: usize,
    cfg: EvConfig,
    lists: Lists,
    ids: Map<u32>,
    /// Target size of R (ARC's `p`).
    p: usize,
    /// Resident keys in F (all score sets).
    f_len: usize,
    flushes: u64,
}

impl EvArc {
    /// An empty EV-ARC of `cap` items.
    pub fn new(cap: usize, cfg: EvConfig) -> Self {
        let cfg = EvConfig {
            max_score: cfg.max_score.max(1),
            ..cfg
        };
        EvArc {
            cap,
            cfg,
            lists: Lists::new(F0 + cfg.max_score as usize + 1),
            ids: map(),
            p: 0,
            f_len: 0,
            flushes: 0,
        }
    }

    /// Perfect pages (score N) in F.
    pub fn perfect_pages(&self) -> usize {
        self.lists.len(F0 + self.cfg.max_score as usize)
    }

    /// Flushes run so far.
    pub fn flushes(&self) -> u64 {
        self.flushes
    }

    fn resident(list: usize) -> bool {
        list == R || list >= F0
    }

    fn move_to(&mut self, id: u32, to: usize) {
        let from = self.lists.list_of(id);
        self.f_len -= usize::from(from >= F0);
        self.f_len += usize::from(to >= F0);
        self.lists.move_back(id, to);
    }

    /// Moves one resident key to its ghost list (ARC's REPLACE).
    fn replace(&mut self, in_fg: bool, evicted: &mut Vec<(u64, u32)>) {
        let r = self.lists.len(R);
        let from_r = r > 0 && (r > self.p || (in_fg && r == self.p) || self.f_len == 0);
        let victim = if from_r {
            self.lists.front(R).map(|id| (id, RG))
        } else {
            (0..=self.cfg.max_score as usize)
                .find_map(|s| self.lists.front(F0 + s))
                .map(|id| (id, FG))
        };
        if let Some((id, ghost)) = victim {
            evicted.push((self.lists.key(id), self.lists.aux(id)));
            self.move_to(id, ghost);
        }
    }

    /// Perfect pages past the trigger go back to R's most recent end with score 0.
    fn flush(&mut self) {
        let Some(t) = self.cfg.flush_threshold else {
            return;
        };
        let top = F0 + self.cfg.max_score as usize;
        let perfect = self.lists.len(top);
        if perfect == 0 || (perfect as f64) < t * self.cap as f64 {
            return;
        }
        self.flushes += 1;
        for _ in 0..flush_count(self.cfg.flush_rate, perfect) {
            if let Some(id) = self.lists.front(top) {
                self.lists.set_aux(id, 0);
                self.move_to(id, R);
            }
        }
    }

    fn drop_ghost(&mut self, l: usize) {
        if let Some(k) = self.lists.pop_front(l) {
            self.ids.remove(&k);
        }
    }

    /// |R| + |R-ghost| ≤ c and |F| + |F-ghost| ≤ c.
    fn trim_ghosts(&mut self) {
        while self.lists.len(R) + self.lists.len(RG) > self.cap && self.lists.len(RG) > 0 {
            self.drop_ghost(RG);
        }
        while self.f_len + self.lists.len(FG) > self.cap && self.lists.len(FG) > 0 {
            self.drop_ghost(FG);
        }
    }
}

impl Policy for EvArc {
    fn contains(&self, key: u64) -> bool {
        self.ids
            .get(&key)
            .is_some_and(|&id| Self::resident(self.lists.list_of(id)))
    }
    fn on_hit(&mut self, key: u64, agg: u32) {
        let Some(&id) = self.ids.get(&key) else {
            return;
        };
        let list = self.lists.list_of(id);
        if !Self::resident(list) {
            return;
        }
        let cur = self.lists.aux(id);
        let new = cur.max(agg.min(self.cfg.max_score));
        if list == R || new > cur || self.cfg.tie_break == TieBreak::Used {
            self.lists.set_aux(id, new);
            self.move_to(id, F0 + new as usize);
            if list == R {
                self.trim_ghosts(); // F grew
            }
        }
    }
    fn on_miss(&mut self, key: u64, agg: u32, evicted: &mut Vec<(u64, u32)>) {
        let c = self.cap;
        if c == 0 {
            return;
        }
        self.flush();
        let s = agg.min(self.cfg.max_score);
        let ghost = self.ids.get(&key).map(|&id| (id, self.lists.list_of(id)));
        match ghost {
            Some((id, RG)) => {
                let d = (self.lists.len(FG) / self.lists.len(RG).max(1)).max(1);
                self.p = (self.p + d).min(c);
                if self.len() >= c {
                    self.replace(false, evicted);
                }
                self.lists.set_aux(id, s);
                self.move_to(id, F0 + s as usize);
            }
            Some((id, FG)) => {
                let d = (self.lists.len(RG) / self.lists.len(FG).max(1)).max(1);
                self.p = self.p.saturating_sub(d);
                if self.len() >= c {
                    self.replace(true, evicted);
                }
                self.lists.set_aux(id, s);
                self.move_to(id, F0 + s as usize);
            }
            Some(_) => return, // resident: not a miss (the protocol never gets here)
            None => {
                if self.len() >= c {
                    if self.lists.len(R) + self.lists.len(RG) >= c && self.lists.len(RG) > 0 {
                        self.drop_ghost(RG);
                    }
                    self.replace(false, evicted);
                }
                let id = self.lists.push_back(R, key);
                self.lists.set_aux(id, s);
                self.ids.insert(key, id);
            }
        }
        self.trim_ghosts();
    }
    fn remove(&mut self, key: u64) -> bool {
        match self.ids.get(&key) {
            Some(&id) if Self::resident(self.lists.list_of(id)) => {
                self.f_len -= usize::from(self.lists.list_of(id) >= F0);
                self.lists.remove(id);
                self.ids.remove(&key);
                true
            }
            _ => false,
        }
    }
    fn len(&self) -> usize {
        self.lists.len(R) + self.f_len
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn score(&self, key: u64) -> u32 {
        match self.ids.get(&key) {
            Some(&id) if Self::resident(self.lists.list_of(id)) => self.lists.aux(id),
            _ => 0,
        }
    }
}

// EV-CAR's lists: the two clocks (front = hand) and their ghosts.
const T1: usize = 0;
const T2: usize = 1;
const B1: usize = 2;
const B2: usize = 3;

/// EV-CAR's recency-side reference bit, kept above the score in `aux`.
const REF: u32 = 1 << 31;

/// EV-CAR: CAR whose frequency clock's reference value is the group score. See the module doc.
///
/// A node's `aux` holds its group score (max-based, capped at N) in the low bits; on the recency
/// clock T1 the top bit is CAR's reference bit (set by a hit). A T1 page found referenced by the
/// hand moves to T2 keeping its score; on T2 the score *is* the reference value R.
pub struct EvCar {
    cap: usize,
    max_score: u32,
    lists: Lists,
    ids: Map<u32>,
    /// Target size of T1 (CAR's `p`).
    p: usize,
    /// Pages T2's hand examines before the decrement grows: `max(1, c / N)`.
    partition: usize,
}

impl EvCar {
    /// An empty EV-CAR of `cap` items for requests of `max_score` keys.
    pub fn new(cap: usize, max_score: u32) -> Self {
        let max_score = max_score.max(1);
        EvCar {
            cap,
            max_score,
            lists: Lists::new(4),
            ids: map(),
            p: 0,
            partition: (cap / max_score as usize).max(1),
        }
    }

    fn cached(&self) -> usize {
        self.lists.len(T1) + self.lists.len(T2)
    }

    /// CAR's REPLACE with T2's hand challenged by the incoming score `agg`.
    fn replace(&mut self, agg: u32, evicted: &mut Vec<(u64, u32)>) {
        let mut examined = 0usize;
        let mut dec = 1u32;
        // Each T1 step moves a page to T2 or evicts; each T2 step lowers a score or evicts. The
        // decrement reaches N after N partitions, so this ends within ~2 rotations.
        let limit = 4 * (self.cap + 1) * (self.max_score as usize + 1);
        for _ in 0..limit {
            let t1 = self.lists.len(T1);
            if t1 >= self.p.max(1) || self.lists.len(T2) == 0 {
                let Some(id) = self.lists.front(T1) else {
                    break;
                };
                let a = self.lists.aux(id);
                if a & REF == 0 {
                    evicted.push((self.lists.key(id), a));
                    self.lists.move_back(id, B1);
                    return;
                }
                self.lists.set_aux(id, a & !REF);
                self.lists.move_back(id, T2);
            } else {
                let Some(id) = self.lists.front(T2) else {
                    break;
                };
                let r = self.lists.aux(id);
                if r == 0 {
                    evicted.push((self.lists.key(id), 0));
                    self.lists.move_back(id, B2);
                    return;
                }
                if r <= agg {
                    self.lists.set_aux(id, 0); // second chance
                } else {
                    self.lists.set_aux(id, r.saturating_sub(dec));
                    examined += 1;
                    if examined >= self.partition {
                        dec += 1;
                        examined = 0;
                    }
                }
                self.lists.move_back(id, T2); // the hand advances
            }
        }
        // Unreachable by the argument above; evict T2's hand rather than loop forever.
        if let Some(id) = self.lists.front(T2).or_else(|| self.lists.front(T1)) {
            let to = if self.lists.list_of(id) == T1 { B1 } else { B2 };
            evicted.push((self.lists.key(id), self.lists.aux(id) & !REF));
            self.lists.move_back(id, to);
        }
    }

    fn drop_ghost(&mut self, l: usize) {
        if let Some(k) = self.lists.pop_front(l) {
            self.ids.remove(&k);
        }
    }
}

impl Policy for EvCar {
    fn contains(&self, key: u64) -> bool {
        self.ids
            .get(&key)
            .is_some_and(|&id| self.lists.list_of(id) <= T2)
    }
    fn on_hit(&mut self, key: u64, agg: u32) {
        let Some(&id) = self.ids.get(&key) else {
            return;
        };
        let l = self.lists.list_of(id);
        let a = self.lists.aux(id);
        let s = (a & !REF).max(agg.min(self.max_score));
        match l {
            T1 => self.lists.set_aux(id, s | REF),
            // On T2 a hit re-arms R with at least 1 (a hit is a reference even at aggHit 0).
            T2 => self.lists.set_aux(id, s.max(1)),
            _ => {}
        }
    }
    fn on_miss(&mut self, key: u64, agg: u32, evicted: &mut Vec<(u64, u32)>) {
        let c = self.cap;
        if c == 0 {
            return;
        }
        let s = agg.min(self.max_score);
        let ghost = self.ids.get(&key).map(|&id| (id, self.lists.list_of(id)));
        if let Some((_, l)) = ghost {
            if l <= T2 {
                return; // resident: not a miss
            }
        }
        if self.cached() >= c {
            self.replace(s, evicted);
            if ghost.is_none() {
                let (t1b1, t2b2) = (
                    self.lists.len(T1) + self.lists.len(B1),
                    self.lists.len(T2) + self.lists.len(B2),
                );
                if t1b1 >= c {
                    self.drop_ghost(B1);
                } else if t1b1 + t2b2 >= 2 * c {
                    self.drop_ghost(B2);
                }
            }
        }
        match ghost {
            Some((id, B1)) => {
                let d = (self.lists.len(B2) / self.lists.len(B1).max(1)).max(1);
                self.p = (self.p + d).min(c);
                self.lists.set_aux(id, s);
                self.lists.move_back(id, T2);
            }
            Some((id, _)) => {
                let d = (self.lists.len(B1) / self.lists.len(B2).max(1)).max(1);
                self.p = self.p.saturating_sub(d);
                self.lists.set_aux(id, s);
                self.lists.move_back(id, T2);
            }
            None => {
                let id = self.lists.push_back(T1, key);
                self.lists.set_aux(id, s);
                self.ids.insert(key, id);
            }
        }
    }
    fn remove(&mut self, key: u64) -> bool {
        match self.ids.get(&key) {
            Some(&id) if self.lists.list_of(id) <= T2 => {
                self.lists.remove(id);
                self.ids.remove(&key);
                true
            }
            _ => false,
        }
    }
    fn len(&self) -> usize {
        self.cached()
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn score(&self, key: u64) -> u32 {
        match self.ids.get(&key) {
            Some(&id) if self.lists.list_of(id) <= T2 => self.lists.aux(id) & !REF,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::request;

    fn req(p: &mut dyn Policy, keys: &[u64], ev: &mut Vec<(u64, u32)>) -> Vec<bool> {
        let mut hits = vec![false; keys.len()];
        request(p, keys, &mut hits, ev);
        hits
    }

    #[test]
    fn ev_arc_promotes_hits_into_score_sets() {
        let mut p = EvArc::new(10, EvConfig::arc(3));
        let mut ev = Vec::new();
        req(&mut p, &[1, 2, 3], &mut ev);
        // Inserted into R with aggHit 0.
        assert_eq!((p.score(1), p.lists.len(R), p.f_len), (0, 3, 0));
        req(&mut p, &[1, 2, 4], &mut ev);
        // 1 and 2 hit with aggHit 2 and move to F's score set 2; 4 enters R with score 2.
        assert_eq!((p.score(1), p.score(2), p.score(4)), (2, 2, 2));
        assert_eq!((p.lists.len(R), p.f_len), (2, 2));
        req(&mut p, &[1, 2, 4], &mut ev);
        assert_eq!(p.perfect_pages(), 3);
        assert!(ev.is_empty());
    }

    #[test]
    fn ev_arc_f_list_evicts_lowest_score_and_ghost_hit_returns_to_f() {
        let cfg = EvConfig {
            flush_threshold: None,
            ..EvConfig::arc(2)
        };
        let mut p = EvArc::new(4, cfg);
        let mut ev = Vec::new();
        req(&mut p, &[1, 2], &mut ev); // R: 1 2 (score 0)
        req(&mut p, &[1, 2], &mut ev); // F2: 1 2
        req(&mut p, &[3, 4], &mut ev); // R: 3 4
        req(&mut p, &[3, 5], &mut ev); // 3 hit (agg 1) -> F1; 5 must evict: R's LRU is 4
        assert_eq!(ev, vec![(4, 0)]);
        // A hit in R's ghost grows p to 1 and brings 4 straight into F with its new score.
        // |R| = 1 (key 5) is not above p, so F gives up the LRU key of its lowest score: 3
        // (score 1), not 1 or 2 (score 2).
        ev.clear();
        req(&mut p, &[4, 1], &mut ev); // 1 hits (aggHit 1), 4 is R's ghost
        assert_eq!(p.p, 1);
        assert_eq!(ev, vec![(3, 1)]);
        assert!(p.contains(4) && p.score(4) == 1 && p.score(1) == 2);
        assert!(p.len() <= 4);
    }

    #[test]
    fn ev_arc_flush_moves_perfect_pages_to_r_with_score_zero() {
        let cfg = EvConfig {
            flush_threshold: Some(0.5),
            ..EvConfig::arc(1)
        };
        let mut p = EvArc::new(20, cfg);
        let mut ev = Vec::new();
        for k in 100..110 {
            req(&mut p, &[k], &mut ev); // R, score 0
        }
        for k in 0..10 {
            req(&mut p, &[k], &mut ev);
            req(&mut p, &[k], &mut ev); // hit alone: aggHit 1 = max, a perfect page
        }
        assert_eq!((p.perfect_pages(), p.len(), p.flushes()), (10, 20, 0));
        req(&mut p, &[200], &mut ev);
        // 10 >= 0.5 * 20: max(1, 0.1 * 10) = 1 perfect page (the LRU one, key 0) moves to R's
        // MRU end with score 0; the insertion then evicts R's LRU page (100) as ARC would.
        assert_eq!(p.flushes(), 1);
        assert_eq!(ev, vec![(100, 0)]);
        assert!(p.contains(0) && p.score(0) == 0);
        assert_eq!(p.lists.list_of(p.ids[&0]), R);
        assert_eq!((p.perfect_pages(), p.len()), (9, 20));
    }

    #[test]
    fn ev_arc_ghosts_stay_within_equal_budgets() {
        let mut p = EvArc::new(50, EvConfig::arc(3));
        let mut ev = Vec::new();
        let mut x = 12345u64;
        for _ in 0..20_000 {
            let mut keys = [0u64; 3];
            for (t, k) in keys.iter_mut().enumerate() {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                *k = ((t as u64) << 40) | ((x >> 33) % (40 + 60 * t as u64));
            }
            ev.clear();
            req(&mut p, &keys, &mut ev);
            assert!(p.len() <= 50);
            assert!(p.lists.len(R) + p.lists.len(RG) <= 50);
            assert!(p.f_len + p.lists.len(FG) <= 50);
            let f: usize = (0..=3).map(|s| p.lists.len(F0 + s)).sum();
            assert_eq!(f, p.f_len);
        }
    }

    #[test]
    fn ev_car_second_chance_and_progressive_decrement() {
        // Capacity 3, N = 2: the decrement grows after every 3 / 2 = 1 page examined.
        let mut p = EvCar::new(3, 2);
        let mut ev = Vec::new();
        for k in 1..=3 {
            p.on_miss(k, 0, &mut ev);
        }
        for (k, s) in [(1, 2), (2, 1), (3, 2)] {
            p.on_hit(k, s);
        }
        p.on_miss(4, 1, &mut ev);
        // T1's hand moves the three referenced pages to T2 (scores 2, 1, 2). T2's hand, for an
        // incoming score of 1: page 1 (2 > 1) drops by 1 to 1, the decrement becomes 2; page 2
        // (1 <= 1) gets a second chance (0); page 3 (2 > 1) drops by 2 to 0, decrement 3;
        // page 1 (1 <= 1) second chance; page 2 has R = 0 and is evicted.
        assert_eq!(ev, vec![(2, 0)]);
        assert_eq!((p.score(1), p.score(3), p.score(4)), (0, 0, 1));
        assert_eq!(p.lists.len(T2), 2);
        assert_eq!(p.lists.len(T1), 1);
    }

    #[test]
    fn ev_car_progressive_decrement_always_finds_a_victim() {
        // Every page perfect (score N): the hand must still evict within a bounded walk.
        let n = 4u32;
        let mut p = EvCar::new(40, n);
        let mut ev = Vec::new();
        for r in 0..10u64 {
            let keys: Vec<u64> = (0..4).map(|t| (t << 40) | r).collect();
            req(&mut p, &keys, &mut ev);
            req(&mut p, &keys, &mut ev);
            req(&mut p, &keys, &mut ev);
        }
        assert_eq!(p.len(), 40);
        assert!((0..10).all(|r| p.score(r) == n));
        ev.clear();
        let keys: Vec<u64> = (0..4).map(|t| (t << 40) | 1000).collect();
        req(&mut p, &keys, &mut ev);
        assert_eq!(ev.len(), 4);
        assert_eq!(p.len(), 40);
        assert!(p.contains(keys[3]));
    }

    #[test]
    fn ev_car_scores_are_max_based() {
        let mut p = EvCar::new(10, 3);
        let mut ev = Vec::new();
        req(&mut p, &[1, 2, 3], &mut ev);
        req(&mut p, &[1, 2, 4], &mut ev);
        assert_eq!((p.score(1), p.score(4)), (2, 2));
        req(&mut p, &[1, 5, 6], &mut ev);
        assert_eq!((p.score(1), p.score(5)), (2, 1));
    }
}
