//! More baselines from the source's comparison (§2.8.2): CAR and LIRS. Both ignore group
//! scores. Thread-safety: owned by one thread (`Send`).

use super::{map, Map, Policy};
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
    fn to_stack_top(&mut self, key: u64) {
        let s = self.entry(key).s;
        if s == NONE {
            let id = self.lists.push_back(S, key);
            self.entry(key).s = id;
        } else {
            self.lists.move_back(s, S);
        }
    }

    /// Puts resident HIR `key` at the end of Q.
    fn to_queue_end(&mut self, key: u64) {
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
        self.to_queue_end(key);
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
                self.to_stack_top(key);
                self.prune();
            }
            State::HirResident if e.s != NONE => {
                self.leave_queue(key);
                self.entry(key).state = State::Lir;
                self.lir += 1;
                self.to_stack_top(key);
                if self.lir > self.lir_cap {
                    self.demote_bottom();
                }
            }
            State::HirResident => {
                self.to_stack_top(key);
                self.to_queue_end(key);
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
            self.to_stack_top(key);
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
            self.to_stack_top(key);
            if self.lir > self.lir_cap {
                self.demote_bottom();
            }
        } else {
            self.entry(key).state = State::HirResident;
            self.to_stack_top(key);
            self.to_queue_end(key);
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
