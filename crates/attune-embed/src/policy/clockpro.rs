//! CLOCK-Pro (Jiang, Chen & Zhang, USENIX ATC '05), the form libCacheSim and pyclockpro use: one
//! ring holds hot pages, cold resident pages and non-resident cold pages still in their test
//! period; three hands sweep it.
//!
//! * A hit sets the page's reference bit; nothing moves.
//! * The **cold hand** (finds a victim): a referenced cold page is promoted to hot; an
//!   unreferenced one is evicted and stays in the ring, non-resident, for its test period.
//! * The **hot hand** (keeps hot pages within `capacity − cold_target`): clears a hot page's bit,
//!   or demotes an unreferenced hot page to cold.
//! * The **test hand** (bounds non-resident pages at the capacity): ends a test period, removing
//!   the page and lowering the cold target by one.
//! * A miss on a page in its test period makes it hot and raises the cold target by one (up to
//!   the capacity); any other miss enters as cold, unreferenced, just behind the hot hand.
//!
//! The cold target adapts within `[1, capacity]` and starts at 1 % of the capacity (at least 1),
//! LIRS's resident-HIR share, of which CLOCK-Pro is the clock approximation. A miss that finds the
//! cold side above its target is fine: the cold hand only runs when a miss needs room, and the
//! hot hand only while the hot side is above `capacity − cold_target`. libCacheSim 0.3.5's ClockPro
//! starts the cold target at the capacity and declines an insertion while the cold side is at its
//! target, so once its first `capacity` keys are in it admits nothing further (a reused set
//! survives any scan, and so does everything else): its hit counts are no reference for this
//! one. Thread-safety: owned by one thread (`Send`).
//!
//! **ClockLIRS** ([`ClockPro::lirs`]) is the same ring run as LIRS on a clock (the clock form of
//! LIRS that the CLOCK-Pro paper builds on, with LIRS's fixed allocation): the cold target stays
//! at 1 % of the capacity, and a resident cold page has a test period (LIRS: it is in the
//! stack) from its insertion until the hot hand passes it. The cold hand promotes a referenced
//! cold page only within its test period; one referenced after it stays cold, moves to the head
//! and starts a new test period (LIRS: a resident HIR block hit outside the stack). The hot hand
//! also ends the test periods of the non-resident pages it passes (LIRS's stack pruning).

use super::{map, Map, Policy};
use crate::lists::Lists;

const NIL: u32 = u32::MAX;
/// The ring is list 0 of a [`Lists`], read circularly.
const RING: usize = 0;

// A page's `aux` word: its state in the low two bits, then its flags.
const ST_MASK: u32 = 0b11;
const REFERENCED: u32 = 0b100;
/// ClockLIRS: a resident cold page within its test period.
const IN_TEST: u32 = 0b1000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum St {
    Hot = 0,
    Cold = 1,
    Test = 2,
}

/// CLOCK-Pro, or ClockLIRS. See the module doc.
pub struct ClockPro {
    cap: usize,
    ring: Lists,
    ids: Map<u32>,
    hand_hot: u32,
    hand_cold: u32,
    hand_test: u32,
    hot: usize,
    cold: usize,
    test: usize,
    cold_target: usize,
    /// CLOCK-Pro adapts the cold target; ClockLIRS keeps it fixed.
    adaptive: bool,
    /// ClockLIRS's test periods for resident cold pages and stack pruning.
    lirs: bool,
    /// EV-CLOCK-Pro: `(N, T)`: an access counts as a reuse only from a request with at most
    /// `T` of its other N − 1 keys missing.
    group: Option<(u32, u32)>,
}

impl ClockPro {
    /// An empty CLOCK-Pro of `cap` items.
    pub fn new(cap: usize) -> Self {
        ClockPro {
            cap,
            ring: Lists::new(1),
            ids: map(),
            hand_hot: NIL,
            hand_cold: NIL,
            hand_test: NIL,
            hot: 0,
            cold: 0,
            test: 0,
            cold_target: (cap / 100).max(1).min(cap.max(1)),
            adaptive: true,
            lirs: false,
            group: None,
        }
    }

    /// An empty EV-CLOCK-Pro of `cap` items over requests of `n` keys: CLOCK-Pro whose
    /// reference bits and test-period promotions count only accesses from requests with at
    /// most `t` other keys missing.
    pub fn grouped(cap: usize, n: u32, t: u32) -> Self {
        ClockPro {
            group: Some((n, t)),
            ..ClockPro::new(cap)
        }
    }

    /// Whether an access from a request with `agg` hits counts, `hit` telling whether the
    /// accessed key itself is one of them.
    #[inline]
    fn counts(&self, agg: u32, hit: bool) -> bool {
        self.group.is_none_or(|(n, t)| {
            let others_missing = n.saturating_sub(agg).saturating_sub(u32::from(!hit));
            others_missing <= t
        })
    }

    /// An empty ClockLIRS of `cap` items.
    pub fn lirs(cap: usize) -> Self {
        ClockPro {
            adaptive: false,
            lirs: true,
            ..ClockPro::new(cap)
        }
    }

    #[inline]
    fn st(&self, id: u32) -> St {
        match self.ring.aux(id) & ST_MASK {
            0 => St::Hot,
            1 => St::Cold,
            _ => St::Test,
        }
    }

    #[inline]
    fn set_st(&mut self, id: u32, st: St) {
        let a = self.ring.aux(id);
        self.ring.set_aux(id, (a & !ST_MASK) | st as u32);
    }

    #[inline]
    fn flag(&self, id: u32, f: u32) -> bool {
        self.ring.aux(id) & f != 0
    }

    #[inline]
    fn set_flag(&mut self, id: u32, f: u32, on: bool) {
        let a = self.ring.aux(id);
        self.ring.set_aux(id, if on { a | f } else { a & !f });
    }

    /// Moves any hand on `id` to its successor (or to nothing if `id` is the only page).
    fn detach(&mut self, id: u32) {
        let succ = if self.ring.len(RING) == 1 {
            NIL
        } else {
            self.ring.ring_next(id)
        };
        for h in [&mut self.hand_hot, &mut self.hand_cold, &mut self.hand_test] {
            if *h == id {
                *h = succ;
            }
        }
    }

    /// Points the hands that have nowhere to be at `id`, a page just linked at the head.
    fn adopt(&mut self, id: u32) {
        if self.hand_hot == NIL {
            self.hand_hot = id;
        }
        for hand in [&mut self.hand_cold, &mut self.hand_test] {
            if *hand == NIL {
                *hand = id;
            }
        }
    }

    /// Moves `id` just behind the hot hand (the ring's head: the last place the hot hand
    /// reaches).
    fn move_to_head(&mut self, id: u32) {
        self.detach(id);
        if self.hand_hot != NIL {
            self.ring.move_before(id, self.hand_hot);
        }
        self.adopt(id);
    }

    /// Links a new page just behind the hot hand.
    fn insert_at_head(&mut self, key: u64, st: St) -> u32 {
        let id = if self.hand_hot == NIL {
            self.ring.push_back(RING, key)
        } else {
            self.ring.insert_before(self.hand_hot, key)
        };
        self.ring.set_aux(id, st as u32);
        self.adopt(id);
        id
    }

    fn release(&mut self, id: u32) {
        self.detach(id);
        let key = self.ring.remove(id);
        self.ids.remove(&key);
    }

    /// Makes `id` (cold or in test) hot at the head, then lets the hot hand demote hot pages
    /// until the hot side is within `capacity − cold_target`.
    fn promote(&mut self, id: u32) {
        let was = self.st(id);
        if was == St::Test && self.adaptive {
            self.cold_target = (self.cold_target + 1).min(self.cap.saturating_sub(1).max(1));
        }
        self.move_to_head(id);
        self.ring.set_aux(id, St::Hot as u32);
        match was {
            St::Cold => self.cold -= 1,
            St::Test => self.test -= 1,
            St::Hot => self.hot -= 1,
        }
        self.hot += 1;
        let mut guard = self.guard();
        while self.hot > self.cap.saturating_sub(self.cold_target) && guard > 0 {
            self.run_hot();
            guard -= 1;
        }
    }

    /// A bound on hand steps within one operation: two sweeps of the ring (four for
    /// ClockLIRS, whose cold hand may first move referenced pages to the head).
    fn guard(&self) -> usize {
        let sweeps = if self.lirs { 4 } else { 2 };
        sweeps * (self.hot + self.cold + self.test) + 4
    }

    /// One step of the cold hand: promotes a referenced cold page, evicts an unreferenced one
    /// (it stays in the ring for its test period; the test hand keeps those within the
    /// capacity), passes other pages.
    fn run_cold(&mut self, evicted: &mut Vec<(u64, u32)>) {
        let id = self.hand_cold;
        if id == NIL {
            return;
        }
        let next = self.ring.ring_next(id);
        if self.st(id) != St::Cold {
            self.hand_cold = next;
            return;
        }
        if self.flag(id, REFERENCED) {
            if self.lirs && !self.flag(id, IN_TEST) {
                // Referenced after its test period: stays cold, starts a new one at the head.
                self.move_to_head(id);
                self.ring.set_aux(id, St::Cold as u32 | IN_TEST);
                return;
            }
            self.promote(id);
            return;
        }
        self.cold -= 1;
        self.test += 1;
        self.ring.set_aux(id, St::Test as u32);
        evicted.push((self.ring.key(id), 0));
        self.hand_cold = next;
        let mut guard = self.guard();
        while self.test > self.cap && guard > 0 {
            self.run_test();
            guard -= 1;
        }
    }

    /// One step of the hot hand: clears a hot page's reference bit or demotes it to cold.
    /// ClockLIRS's hot hand also ends the test periods of the cold pages it passes.
    fn run_hot(&mut self) {
        let id = self.hand_hot;
        if id == NIL {
            return;
        }
        self.hand_hot = self.ring.ring_next(id);
        match self.st(id) {
            St::Hot => {}
            St::Cold => {
                if self.lirs {
                    self.set_flag(id, IN_TEST, false);
                }
                return;
            }
            St::Test => {
                if self.lirs {
                    self.release(id);
                    self.test -= 1;
                }
                return;
            }
        }
        if self.flag(id, REFERENCED) {
            self.set_flag(id, REFERENCED, false);
            return;
        }
        self.set_st(id, St::Cold);
        self.hot -= 1;
        self.cold += 1;
    }

    /// One step of the test hand: ends a test period (the page leaves the ring and, in
    /// CLOCK-Pro, the cold target drops by one) or passes a resident page.
    fn run_test(&mut self) {
        let id = self.hand_test;
        if id == NIL {
            return;
        }
        if self.st(id) != St::Test {
            self.hand_test = self.ring.ring_next(id);
            return;
        }
        self.release(id);
        self.test -= 1;
        if self.adaptive {
            self.cold_target = self.cold_target.saturating_sub(1).max(1);
        }
    }

    fn resident(&self) -> usize {
        self.hot + self.cold
    }
}

impl Policy for ClockPro {
    fn contains(&self, key: u64) -> bool {
        self.ids
            .get(&key)
            .is_some_and(|&id| self.st(id) != St::Test)
    }
    fn on_hit(&mut self, key: u64, agg: u32) {
        if !self.counts(agg, true) {
            return;
        }
        if let Some(&id) = self.ids.get(&key) {
            if self.st(id) != St::Test {
                self.set_flag(id, REFERENCED, true);
            }
        }
    }
    fn on_miss(&mut self, key: u64, agg: u32, evicted: &mut Vec<(u64, u32)>) {
        if self.cap == 0 {
            return;
        }
        let mut found = self.ids.get(&key).copied();
        if found.is_some_and(|id| self.st(id) != St::Test) {
            return; // resident: not a miss
        }
        if let Some(id) = found.filter(|_| !self.counts(agg, false)) {
            // EV-CLOCK-Pro: a reuse from a request far from perfect is not one; the test
            // period ends and the key enters as new.
            self.release(id);
            self.test -= 1;
            found = None;
        }
        let mut guard = self.guard();
        while self.resident() >= self.cap && guard > 0 {
            self.run_cold(evicted);
            guard -= 1;
        }
        // The test hand may have ended this key's test period meanwhile.
        if let Some(id) = found.filter(|&id| self.ids.get(&key) == Some(&id)) {
            self.promote(id);
        } else {
            let id = self.insert_at_head(key, St::Cold);
            if self.lirs {
                self.set_flag(id, IN_TEST, true);
            }
            self.ids.insert(key, id);
            self.cold += 1;
        }
        // Last resort (never reached in the tests): evict any resident page beyond capacity.
        while self.resident() > self.cap {
            let Some((&k, &id)) = self
                .ids
                .iter()
                .find(|(&k, &id)| k != key && self.st(id) != St::Test)
            else {
                break;
            };
            match self.st(id) {
                St::Hot => self.hot -= 1,
                _ => self.cold -= 1,
            }
            self.release(id);
            evicted.push((k, 0));
        }
    }
    fn remove(&mut self, key: u64) -> bool {
        match self.ids.get(&key).copied() {
            Some(id) if self.st(id) != St::Test => {
                match self.st(id) {
                    St::Hot => self.hot -= 1,
                    _ => self.cold -= 1,
                }
                self.release(id);
                true
            }
            _ => false,
        }
    }
    fn len(&self) -> usize {
        self.resident()
    }
    fn capacity(&self) -> usize {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_hits as hits;

    #[test]
    fn clockpro_keeps_a_reused_set_through_a_scan() {
        let mut p = ClockPro::new(10);
        // A working set of 5 reused often, then a long one-off scan, then the set again.
        for _ in 0..20 {
            hits(&mut p, 0..5);
        }
        hits(&mut p, 1000..1200);
        assert!(p.len() <= 10);
        assert_eq!(hits(&mut p, 0..5), 5, "hot pages survive the scan");
    }

    #[test]
    fn clockpro_test_period_hit_promotes_to_hot() {
        let mut p = ClockPro::new(4);
        let mut ev = Vec::new();
        for k in 0..4 {
            p.access(k, &mut ev);
        }
        p.access(10, &mut ev); // evicts a cold page: it stays in its test period
        let gone = ev[0].0;
        assert!(!p.contains(gone));
        p.access(gone, &mut ev); // back within its test period: hot
        assert!(p.contains(gone));
        assert_eq!(p.st(p.ids[&gone]), St::Hot);
        assert!(p.len() <= 4);
    }
}
