//! More baselines from the source's comparison (§2.8.2): CAR and LIRS. Both ignore group
//! scores. Thread-safety: owned by one thread (`Send`).

use super::{map, FreqOrder, Map, Policy};
use crate::lists::Lists;

const T1: usize = 0;
const T2: usize = 1;
const B1: usize = 2;
const B2: usize = 3;

/// CAR (Bansal & Modha, FAST '04): two CLOCKs (T1 recency, T2 frequency) with reference bits,
/// ghost lists B1 and B2, and ARC's adaptive target `p` for |T1|. A clock is a list whose front
/// is the hand; advancing the hand moves the front to the back. The reference bit is the node's
/// `aux`.
pub struct Car {
    cap: usize,
    lists: Lists,
    ids: Map<u32>,
    p: usize,
}

impl Car {
    /// An empty CAR of `cap` items.
    pub fn new(cap: usize) -> Self {
        Car {
            cap,
            lists: Lists::new(4),
            ids: map(),
            p: 0,
        }
    }

    fn cached(&self) -> usize {
        self.lists.len(T1) + self.lists.len(T2)
    }

    fn replace(&mut self, evicted: &mut Vec<(u64, u32)>) {
        // Each step either evicts or clears a bit; two rotations always find a clear bit.
        for _ in 0..=2 * self.cap + 1 {
            let from_t1 = self.lists.len(T1) >= self.p.max(1) || self.lists.len(T2) == 0;
            let (hand, ghost, next) = if from_t1 { (T1, B1, T2) } else { (T2, B2, T2) };
            let Some(id) = self.lists.front(hand) else {
                return;
            };
            if self.lists.aux(id) == 0 {
                evicted.push((self.lists.key(id), 0));
                self.lists.move_back(id, ghost);
                return;
            }
            self.lists.set_aux(id, 0);
            self.lists.move_back(id, next);
        }
    }

    fn drop_ghost(&mut self, l: usize) {
        if let Some(k) = self.lists.pop_front(l) {
            self.ids.remove(&k);
        }
    }
}

impl Policy for Car {
    fn contains(&self, key: u64) -> bool {
        self.ids
            .get(&key)
            .is_some_and(|&id| self.lists.list_of(id) <= T2)
    }
    fn on_hit(&mut self, key: u64, _agg: u32) {
        if let Some(&id) = self.ids.get(&key) {
            if self.lists.list_of(id) <= T2 {
                self.lists.set_aux(id, 1);
            }
        }
    }
    fn on_miss(&mut self, key: u64, _agg: u32, evicted: &mut Vec<(u64, u32)>) {
        let c = self.cap;
        if c == 0 {
            return;
        }
        let ghost = self.ids.get(&key).map(|&id| (id, self.lists.list_of(id)));
        if ghost.is_some_and(|(_, l)| l <= T2) {
            return; // resident: not a miss
        }
        if self.cached() >= c {
            self.replace(evicted);
            if ghost.is_none() {
                let t1b1 = self.lists.len(T1) + self.lists.len(B1);
                if t1b1 >= c {
                    self.drop_ghost(B1);
                } else if t1b1 + self.lists.len(T2) + self.lists.len(B2) >= 2 * c {
                    self.drop_ghost(B2);
                }
            }
        }
        match ghost {
            Some((id, B1)) => {
                let d = (self.lists.len(B2) / self.lists.len(B1).max(1)).max(1);
                self.p = (self.p + d).min(c);
                self.lists.set_aux(id, 0);
                self.lists.move_back(id, T2);
            }
            Some((id, _)) => {
                let d = (self.lists.len(B1) / self.lists.len(B2).max(1)).max(1);
                self.p = self.p.saturating_sub(d);
                self.lists.set_aux(id, 0);
                self.lists.move_back(id, T2);
            }
            None => {
                let id = self.lists.push_back(T1, key);
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
}

const NONE: u32 = u32::MAX;
/// LIRS stack S (front = bottom, back = top) and resident-HIR queue Q (front = next victim).
const S: usize = 0;
const Q: usize = 1;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Lir,
    HirResident,
    HirGhost,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    state: State,
    s: u32,
    q: u32,
}

/// LIRS (Jiang & Zhang, SIGMETRICS '02): LIR keys (short reuse distance) hold `cap − h` slots,
/// resident HIR keys the other `h` = max(1, 1 % of cap) (the paper's and libCacheSim's 1 %) in a
/// FIFO queue Q; the stack S keeps recency over LIR, resident and non-resident HIR keys and is
/// pruned so that its bottom is always LIR. Non-resident entries are bounded by pruning only, as
/// in the paper.
pub struct Lirs {
    cap: usize,
    lir_cap: usize,
    lir: usize,
    lists: Lists,
    meta: Map<Entry>,
}

impl Lirs {
    /// An empty LIRS of `cap` items.
    pub fn new(cap: usize) -> Self {
        let hir = (cap / 100).max(1).min(cap);
        Lirs {
            cap,
            lir_cap: cap - hir,
            lir: 0,
            lists: Lists::new(2),
            meta: map(),
        }
    }

    fn entry(&mut self, key: u64) -> &mut Entry {
        self.meta.entry(key).or_insert(Entry {
            state: State::HirGhost,
            s: NONE,
            q: NONE,
        })
    }

    /// Puts `key` on top of S.
    fn push_stack_top(&mut self, key: u64) {
        let s = self.entry(key).s;
        if s == NONE {
            let id = self.lists.push_back(S, key);
            self.entry(key).s = id;
        } else {
            self.lists.move_back(s, S);
        }
    }

    /// Puts resident HIR `key` at the end of Q.
    fn push_queue_end(&mut self, key: u64) {
        let q = self.entry(key).q;
        if q == NONE {
            let id = self.lists.push_back(Q, key);
            self.entry(key).q = id;
        } else {
            self.lists.move_back(q, Q);
        }
    }

    fn leave_queue(&mut self, key: u64) {
        let e = self.entry(key);
        let q = std::mem::replace(&mut e.q, NONE);
        if q != NONE {
            self.lists.remove(q);
        }
    }

    /// Removes non-LIR entries from S's bottom; forgets ghosts that leave S.
    fn prune(&mut self) {
        while let Some(id) = self.lists.front(S) {
            let key = self.lists.key(id);
            let Some(e) = self.meta.get_mut(&key) else {
                self.lists.remove(id);
                continue;
            };
            if e.state == State::Lir {
                return;
            }
            e.s = NONE;
            let ghost = e.state == State::HirGhost;
            self.lists.remove(id);
            if ghost {
                self.meta.remove(&key);
            }
        }
    }

    /// The LIR key at S's bottom becomes a resident HIR at Q's end.
    fn demote_bottom(&mut self) {
        let Some(id) = self.lists.front(S) else {
            return;
        };
        let key = self.lists.key(id);
        self.lists.remove(id);
        let e = self.entry(key);
        e.s = NONE;
        e.state = State::HirResident;
        self.lir -= 1;
        self.push_queue_end(key);
        self.prune();
    }

    fn resident(&self) -> usize {
        self.lir + self.lists.len(Q)
    }
}

impl Policy for Lirs {
    fn contains(&self, key: u64) -> bool {
        self.meta
            .get(&key)
            .is_some_and(|e| e.state != State::HirGhost)
    }
    fn on_hit(&mut self, key: u64, _agg: u32) {
        let Some(&e) = self.meta.get(&key) else {
            return;
        };
        match e.state {
            State::Lir => {
                self.push_stack_top(key);
                self.prune();
            }
            State::HirResident if e.s != NONE => {
                self.leave_queue(key);
                self.entry(key).state = State::Lir;
                self.lir += 1;
                self.push_stack_top(key);
                if self.lir > self.lir_cap {
                    self.demote_bottom();
                }
            }
            State::HirResident => {
                self.push_stack_top(key);
                self.push_queue_end(key);
            }
            State::HirGhost => {}
        }
    }
    fn on_miss(&mut self, key: u64, _agg: u32, evicted: &mut Vec<(u64, u32)>) {
        if self.cap == 0 || self.contains(key) {
            return;
        }
        if self.lir < self.lir_cap && !self.meta.contains_key(&key) {
            // Filling: new keys are LIR until the LIR set is full.
            self.entry(key).state = State::Lir;
            self.lir += 1;
            self.push_stack_top(key);
            return;
        }
        if self.resident() >= self.cap {
            if let Some(v) = self.lists.pop_front(Q) {
                evicted.push((v, 0));
                if let Some(e) = self.meta.get_mut(&v) {
                    e.q = NONE;
                    e.state = State::HirGhost;
                    if e.s == NONE {
                        self.meta.remove(&v);
                    }
                }
            }
        }
        let in_stack = self.meta.get(&key).is_some_and(|e| e.s != NONE);
        if in_stack {
            self.entry(key).state = State::Lir;
            self.lir += 1;
            self.push_stack_top(key);
            if self.lir > self.lir_cap {
                self.demote_bottom();
            }
        } else {
            self.entry(key).state = State::HirResident;
            self.push_stack_top(key);
            self.push_queue_end(key);
        }
    }
    fn remove(&mut self, key: u64) -> bool {
        let Some(e) = self.meta.get(&key).copied() else {
            return false;
        };
        if e.state == State::HirGhost {
            return false;
        }
        if e.s != NONE {
            self.lists.remove(e.s);
        }
        if e.q != NONE {
            self.lists.remove(e.q);
        }
        if e.state == State::Lir {
            self.lir -= 1;
        }
        self.meta.remove(&key);
        self.prune();
        true
    }
    fn len(&self) -> usize {
        self.resident()
    }
    fn capacity(&self) -> usize {
        self.cap
    }
}

// LeCaR's lists: residents in recency order, then the two histories (front = oldest).
const RES: usize = 0;
const H_LRU: usize = 1;
const H_LFU: usize = 2;

/// LeCaR (Vietri et al., HotStorage '18): LRU and LFU experts over one set of resident keys,
/// each eviction drawn from one expert with probability its weight; a miss on a key in an
/// expert's history (keys it evicted, at most `cap` each) is that expert's regret and shifts
/// weight to the other: `w_other *= exp(λ · d^age)`, λ = 0.45, d = 0.005^(1/cap), age in
/// requests since the eviction. The draw uses a fixed-seed generator, so runs repeat exactly.
/// LFU ties go to the least recently used.
pub struct LeCar {
    cap: usize,
    lists: Lists,
    ids: Map<u32>,
    /// Resident keys by (frequency, last use): the LFU expert's order.
    freq: FreqOrder,
    /// Per history key: when it was evicted.
    evicted_at: Map<u64>,
    w_lru: f64,
    discount: f64,
    time: u64,
    rng: u64,
}

/// LeCaR's learning rate (the paper's default).
const LECAR_LEARNING_RATE: f64 = 0.45;

impl LeCar {
    /// An empty LeCaR of `cap` items.
    pub fn new(cap: usize) -> Self {
        LeCar {
            cap,
            lists: Lists::new(3),
            ids: map(),
            freq: FreqOrder::default(),
            evicted_at: map(),
            w_lru: 0.5,
            discount: 0.005f64.powf(1.0 / cap.max(1) as f64),
            time: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// The weight of the LRU expert (LFU's is 1 − it).
    pub fn lru_weight(&self) -> f64 {
        self.w_lru
    }

    fn uniform(&mut self) -> f64 {
        // xorshift64*: deterministic, good enough for a coin.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn forget(&mut self, key: u64) {
        if let Some(id) = self.ids.remove(&key) {
            self.lists.remove(id);
            self.evicted_at.remove(&key);
        }
    }

    fn learn(&mut self, key: u64, history: usize) {
        let evicted_at = self.evicted_at.get(&key).copied().unwrap_or(self.time);
        let reward = self.discount.powf((self.time - evicted_at) as f64);
        let (mut lru, mut lfu) = (self.w_lru, 1.0 - self.w_lru);
        if history == H_LRU {
            lfu *= (LECAR_LEARNING_RATE * reward).exp();
        } else {
            lru *= (LECAR_LEARNING_RATE * reward).exp();
        }
        self.w_lru = lru / (lru + lfu);
        self.forget(key);
    }

    fn evict(&mut self, evicted: &mut Vec<(u64, u32)>) {
        let lru_victim = self.lists.front(RES).map(|id| self.lists.key(id));
        let lfu_victim = self.freq.first();
        let (Some(a), Some(b)) = (lru_victim, lfu_victim) else {
            return;
        };
        let use_lru = self.uniform() < self.w_lru;
        let victim = if use_lru { a } else { b };
        if self.freq.remove(victim).is_none() {
            return;
        }
        evicted.push((victim, 0));
        let Some(&id) = self.ids.get(&victim) else {
            return;
        };
        if a == b {
            // Both experts agree: no one to blame later.
            self.lists.remove(id);
            self.ids.remove(&victim);
            return;
        }
        let h = if use_lru { H_LRU } else { H_LFU };
        self.lists.move_back(id, h);
        self.evicted_at.insert(victim, self.time);
        if self.lists.len(h) > self.cap {
            if let Some(old) = self.lists.front(h).map(|id| self.lists.key(id)) {
                self.forget(old);
            }
        }
    }
}

impl Policy for LeCar {
    fn contains(&self, key: u64) -> bool {
        self.ids
            .get(&key)
            .is_some_and(|&id| self.lists.list_of(id) == RES)
    }
    fn on_hit(&mut self, key: u64, _agg: u32) {
        self.time += 1;
        let Some(&id) = self.ids.get(&key) else {
            return;
        };
        if self.lists.list_of(id) != RES {
            return;
        }
        self.lists.move_back(id, RES);
        self.freq.add(key, 1, self.time);
    }
    fn on_miss(&mut self, key: u64, _agg: u32, evicted: &mut Vec<(u64, u32)>) {
        self.time += 1;
        if self.cap == 0 || self.contains(key) {
            return;
        }
        if let Some(&id) = self.ids.get(&key) {
            let h = self.lists.list_of(id);
            self.learn(key, h);
        }
        if self.freq.len() >= self.cap {
            self.evict(evicted);
        }
        let id = self.lists.push_back(RES, key);
        self.ids.insert(key, id);
        self.freq.set(key, 1, self.time);
    }
    fn remove(&mut self, key: u64) -> bool {
        if !self.contains(key) {
            return false;
        }
        self.freq.remove(key);
        self.forget(key);
        true
    }
    fn len(&self) -> usize {
        self.freq.len()
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
    fn car_keeps_frequent_keys_through_a_scan() {
        let mut p = Car::new(4);
        let mut ev = Vec::new();
        for k in [1, 2, 1, 2] {
            p.access(k, &mut ev);
        }
        hits(&mut p, 100..120);
        assert!(
            p.contains(1) && p.contains(2),
            "T2 pages survive a one-time scan"
        );
        assert!(p.len() <= 4);
    }

    #[test]
    fn car_ghost_hit_adapts_p() {
        let mut p = Car::new(2);
        let mut ev = Vec::new();
        for k in [1, 1, 2, 3] {
            p.access(k, &mut ev);
        }
        // 3's insertion: the hand finds 1 referenced (to T2), then evicts 2 into B1.
        assert_eq!(ev, vec![(2, 0)]);
        assert_eq!(p.p, 0);
        p.access(2, &mut ev); // a B1 ghost: replace first, then p grows and 2 enters T2
        assert_eq!(p.p, 1);
        assert!(p.contains(2) && p.lists.list_of(p.ids[&2]) == T2);
        assert!(p.len() <= 2);
    }

    #[test]
    fn lirs_survives_a_loop_larger_than_the_cache() {
        // A loop over cap + 1 keys: LRU never hits; LIRS keeps its LIR set and hits on it.
        let cap = 100;
        let stream = || (0..20).flat_map(|_| 0..(cap as u64 + 1));
        let lru = hits(&mut crate::policy::Lru::new(cap), stream());
        let lirs = hits(&mut Lirs::new(cap), stream());
        assert_eq!(lru, 0);
        assert!(lirs > 19 * (cap - 2), "lirs hits {lirs}");
    }

    #[test]
    fn lirs_bottom_of_the_stack_is_always_lir() {
        let mut p = Lirs::new(20);
        let mut ev = Vec::new();
        let mut x = 7u64;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let k = (x >> 33) % 60;
            p.access(k, &mut ev);
            assert!(p.len() <= 20);
            assert!(p.lir <= p.lir_cap);
            if let Some(id) = p.lists.front(S) {
                assert_eq!(p.meta[&p.lists.key(id)].state, State::Lir);
            }
            assert_eq!(p.lists.len(Q) + p.lir, p.len());
        }
    }

    #[test]
    fn lecar_shifts_weight_to_the_expert_that_was_right() {
        // Two hot keys then a stream of one-time keys: LRU's evictions of the hot keys are
        // regretted, so the weight moves to LFU and the hot keys stay.
        let mut p = LeCar::new(4);
        let mut ev = Vec::new();
        for round in 0..200u64 {
            for k in [1, 1, 2, 2] {
                p.access(k, &mut ev);
            }
            for j in 0..5 {
                p.access(1000 + round * 5 + j, &mut ev);
            }
        }
        assert!(p.lru_weight() < 0.5, "w_lru {}", p.lru_weight());
        assert!(p.len() <= 4);
    }
}
