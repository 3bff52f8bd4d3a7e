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

use super::{map, Map, Policy};

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum St {
    Hot,
    Cold,
    Test,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    key: u64,
    prev: u32,
    next: u32,
    st: St,
    referenced: bool,
}

/// CLOCK-Pro. See the module doc.
pub struct ClockPro {
    cap: usize,
    nodes: Vec<Node>,
    free: Vec<u32>,
    ids: Map<u32>,
    hand_hot: u32,
    hand_cold: u32,
    hand_test: u32,
    hot: usize,
    cold: usize,
    test: usize,
    cold_target: usize,
}

impl ClockPro {
    /// An empty CLOCK-Pro of `cap` items.
    pub fn new(cap: usize) -> Self {
        ClockPro {
            cap,
            nodes: Vec::new(),
            free: Vec::new(),
            ids: map(),
            hand_hot: NIL,
            hand_cold: NIL,
            hand_test: NIL,
            hot: 0,
            cold: 0,
            test: 0,
            cold_target: (cap / 100).max(1).min(cap.max(1)),
        }
    }

    /// Unlinks `id` from the ring, moving any hand on it to its successor.
    fn unlink(&mut self, id: u32) {
        let Node { prev, next, .. } = self.nodes[id as usize];
        let succ = if next == id { NIL } else { next };
        for h in [&mut self.hand_hot, &mut self.hand_cold, &mut self.hand_test] {
            if *h == id {
                *h = succ;
            }
        }
        if succ != NIL {
            self.nodes[prev as usize].next = next;
            self.nodes[next as usize].prev = prev;
        }
    }

    /// Links `id` just behind the hot hand (the ring's head: the last place the hot hand
    /// reaches).
    fn link_at_head(&mut self, id: u32) {
        if self.hand_hot == NIL {
            let n = &mut self.nodes[id as usize];
            n.prev = id;
            n.next = id;
            self.hand_hot = id;
            if self.hand_cold == NIL {
                self.hand_cold = id;
            }
            if self.hand_test == NIL {
                self.hand_test = id;
            }
            return;
        }
        let h = self.hand_hot;
        let p = self.nodes[h as usize].prev;
        self.nodes[id as usize].prev = p;
        self.nodes[id as usize].next = h;
        self.nodes[p as usize].next = id;
        self.nodes[h as usize].prev = id;
        for hand in [&mut self.hand_cold, &mut self.hand_test] {
            if *hand == NIL {
                *hand = id;
            }
        }
    }

    fn alloc(&mut self, key: u64, st: St) -> u32 {
        let n = Node {
            key,
            prev: NIL,
            next: NIL,
            st,
            referenced: false,
        };
        if let Some(id) = self.free.pop() {
            self.nodes[id as usize] = n;
            id
        } else {
            self.nodes.push(n);
            (self.nodes.len() - 1) as u32
        }
    }

    fn release(&mut self, id: u32) {
        self.unlink(id);
        self.ids.remove(&self.nodes[id as usize].key);
        self.free.push(id);
    }

    /// Makes `id` (cold or in test) hot at the head, then lets the hot hand demote hot pages
    /// until the hot side is within `capacity − cold_target`.
    fn promote(&mut self, id: u32) {
        let was = self.nodes[id as usize].st;
        if was == St::Test {
            self.cold_target = (self.cold_target + 1).min(self.cap.saturating_sub(1).max(1));
        }
        self.unlink(id);
        self.link_at_head(id);
        let n = &mut self.nodes[id as usize];
        n.st = St::Hot;
        n.referenced = false;
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

    /// A bound on hand steps within one operation: two sweeps of the ring.
    fn guard(&self) -> usize {
        2 * (self.hot + self.cold + self.test) + 4
    }

    /// One step of the cold hand: promotes a referenced cold page, evicts an unreferenced one
    /// (it stays in the ring for its test period; the test hand keeps those within the
    /// capacity), passes other pages.
    fn run_cold(&mut self, evicted: &mut Vec<(u64, u32)>) {
        let id = self.hand_cold;
        if id == NIL {
            return;
        }
        let n = self.nodes[id as usize];
        if n.st != St::Cold {
            self.hand_cold = n.next;
            return;
        }
        if n.referenced {
            self.promote(id);
            return;
        }
        self.cold -= 1;
        self.test += 1;
        self.nodes[id as usize].st = St::Test;
        evicted.push((n.key, 0));
        self.hand_cold = n.next;
        let mut guard = self.guard();
        while self.test > self.cap && guard > 0 {
            self.run_test();
            guard -= 1;
        }
    }

    /// One step of the hot hand: clears a hot page's reference bit or demotes it to cold.
    fn run_hot(&mut self) {
        let id = self.hand_hot;
        if id == NIL {
            return;
        }
        let n = self.nodes[id as usize];
        self.hand_hot = n.next;
        if n.st != St::Hot {
            return;
        }
        if n.referenced {
            self.nodes[id as usize].referenced = false;
            return;
        }
        self.nodes[id as usize].st = St::Cold;
        self.hot -= 1;
        self.cold += 1;
    }

    /// One step of the test hand: ends a test period (the page leaves the ring and the cold
    /// target drops by one) or passes a resident page.
    fn run_test(&mut self) {
        let id = self.hand_test;
        if id == NIL {
            return;
        }
        let n = self.nodes[id as usize];
        if n.st != St::Test {
            self.hand_test = n.next;
            return;
        }
        self.release(id);
        self.test -= 1;
        self.cold_target = self.cold_target.saturating_sub(1).max(1);
    }

    fn resident(&self) -> usize {
        self.hot + self.cold
    }
}

impl Policy for ClockPro {
    fn contains(&self, key: u64) -> bool {
        self.ids
            .get(&key)
            .is_some_and(|&id| self.nodes[id as usize].st != St::Test)
    }
    fn on_hit(&mut self, key: u64, _agg: u32) {
        if let Some(&id) = self.ids.get(&key) {
            if self.nodes[id as usize].st != St::Test {
                self.nodes[id as usize].referenced = true;
            }
        }
    }
    fn on_miss(&mut self, key: u64, _agg: u32, evicted: &mut Vec<(u64, u32)>) {
        if self.cap == 0 {
            return;
        }
        let found = self.ids.get(&key).copied();
        if found.is_some_and(|id| self.nodes[id as usize].st != St::Test) {
            return; // resident: not a miss
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
            let id = self.alloc(key, St::Cold);
            self.link_at_head(id);
            self.ids.insert(key, id);
            self.cold += 1;
        }
        // Last resort (never reached in the tests): evict any resident page beyond capacity.
        while self.resident() > self.cap {
            let Some((&k, &id)) = self
                .ids
                .iter()
                .find(|(&k, &id)| k != key && self.nodes[id as usize].st != St::Test)
            else {
                break;
            };
            match self.nodes[id as usize].st {
                St::Hot => self.hot -= 1,
                _ => self.cold -= 1,
            }
            self.release(id);
            evicted.push((k, 0));
        }
    }
    fn remove(&mut self, key: u64) -> bool {
        match self.ids.get(&key).copied() {
            Some(id) if self.nodes[id as usize].st != St::Test => {
                match self.nodes[id as usize].st {
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

    fn hits(p: &mut dyn Policy, keys: impl IntoIterator<Item = u64>) -> usize {
        let mut ev = Vec::new();
        keys.into_iter().filter(|&k| p.access(k, &mut ev)).count()
    }

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
        assert_eq!(p.nodes[p.ids[&gone] as usize].st, St::Hot);
        assert!(p.len() <= 4);
    }
}
