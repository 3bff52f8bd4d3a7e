//! Cacheus (Rodriguez et al., FAST '21): two experts over one resident set, each eviction drawn
//! from one of them with probability its weight, the weights learned from regret (a miss on a
//! key in an expert's eviction history lowers that expert's weight by `exp(−λ)`), and the
//! learning rate λ itself adapted every `capacity` requests from the change in hit rate.
//!
//! * **SR-LRU** (scan-resistant LRU): new keys enter the list SR, keys hit again move to R
//!   (when R is full its least recently used key is demoted to SR's most recent end); the
//!   victim is SR's least recently used key; keys leaving SR go to a history H of `capacity`
//!   keys. SR's share starts at half the capacity and adapts: a hit on a demoted key shrinks SR
//!   by `max(1, C_new / C_demoted)`, a miss on a key that left SR as new grows it by
//!   `max(1, C_demoted / C_new)` (integer quotients; C_new counts new keys in H, C_demoted
//!   demoted keys in SR). A key missed while in H goes straight to R.
//! * **CR-LFU** (churn-resistant LFU): the lowest frequency, ties to the **most** recently used;
//!   a key missed while in H comes back with the frequency it left with, plus one.
//! * Eviction histories: the keys each expert evicted alone, `capacity / 2` each (LRU order); a
//!   victim both experts choose goes to neither.
//! * Learning rate: starts at a draw in [0.001, 1); every `capacity` requests, with
//!   `δHR` the change in hit rate and `δλ` the previous change in λ: if `δλ ≠ 0`,
//!   `λ += sign(δHR / δλ) · |λ · δλ|` (floored at 0.001); otherwise ten windows in a row without
//!   a gain redraw λ.
//!
//! Draws come from a fixed-seed generator, so runs repeat exactly. Where libCacheSim's
//! `Cacheus` (the cross-check, `python/tests/test_embed.py`) departs from the paper, this follows
//! the paper: its SR-LRU flags live on a copy that is reset when a key changes list, so its SR
//! share never moves from one half, and its hit rate is an integer quotient, so its λ never
//! moves from the first draw. Thread-safety: owned by one thread (`Send`).

use super::{map, FreqOrder, Map, Policy};
use crate::lists::Lists;

const SR: usize = 0;
const R: usize = 1;
const H: usize = 2;
const G_LRU: usize = 3;
const G_LFU: usize = 4;

// A node's `aux` word in SR, R and H: two flags, and in H the frequency the key left with.
const NEW: u32 = 1;
const DEMOTED: u32 = 2;
const FREQ_SHIFT: u32 = 2;

/// Cacheus. See the module doc.
pub struct Cacheus {
    cap: usize,
    lists: Lists,
    /// Keys in SR, R or H.
    node: Map<u32>,
    /// Keys in an eviction history.
    ghost: Map<u32>,
    /// CR-LFU's order over resident keys: (frequency, u64::MAX − last use).
    freq: FreqOrder,
    sr_cap: usize,
    c_new: u64,
    c_demoted: u64,
    w_lru: f64,
    lr: f64,
    lr_prev: f64,
    hr_prev: f64,
    unlearn: u32,
    window_hits: u64,
    time: u64,
    rng: u64,
}

impl Cacheus {
    /// An empty Cacheus of `cap` items.
    pub fn new(cap: usize) -> Self {
        let mut c = Cacheus {
            cap,
            lists: Lists::new(5),
            node: map(),
            ghost: map(),
            freq: FreqOrder::default(),
            sr_cap: (cap / 2).max(1),
            c_new: 0,
            c_demoted: 0,
            w_lru: 0.5,
            lr: 0.0,
            lr_prev: 0.0,
            hr_prev: 0.0,
            unlearn: 0,
            window_hits: 0,
            time: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
        };
        c.lr = c.draw_lr();
        c
    }

    /// The weight of the SR-LRU expert (CR-LFU's is 1 − it).
    pub fn lru_weight(&self) -> f64 {
        self.w_lru
    }

    /// SR's current share of the capacity, in items.
    pub fn sr_capacity(&self) -> usize {
        self.sr_cap
    }

    fn next_u64(&mut self) -> u64 {
        // xorshift64*: deterministic.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn draw_lr(&mut self) -> f64 {
        0.001 + (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 0.999
    }

    fn r_cap(&self) -> usize {
        self.cap.saturating_sub(self.sr_cap)
    }

    fn resident(&self) -> usize {
        self.lists.len(SR) + self.lists.len(R)
    }

    fn stamp(&self) -> u64 {
        u64::MAX - self.time
    }

    /// Demotes R's least recently used keys to SR's most recent end until R has room for one.
    fn make_room_in_r(&mut self) {
        while self.lists.len(R) + 1 > self.r_cap().max(1) {
            let Some(id) = self.lists.front(R) else {
                return;
            };
            self.lists.move_back(id, SR);
            if self.lists.aux(id) & DEMOTED == 0 {
                self.c_demoted += 1;
                self.lists.set_aux(id, self.lists.aux(id) | DEMOTED);
            }
        }
    }

    /// Moves resident `id` into H (its key leaves the cache), recording its CR-LFU frequency.
    fn send_to_history(&mut self, id: u32) {
        let key = self.lists.key(id);
        let mut flags = self.lists.aux(id) & NEW;
        if flags & NEW != 0 {
            self.c_new += 1;
        }
        if self.lists.aux(id) & DEMOTED != 0 {
            self.c_demoted -= 1;
        }
        let f = self
            .freq
            .remove(key)
            .unwrap_or(1)
            .min(u64::from(u32::MAX >> FREQ_SHIFT));
        flags |= (f as u32) << FREQ_SHIFT;
        self.lists.move_back(id, H);
        self.lists.set_aux(id, flags);
        while self.lists.len(H) >= self.cap.max(1) {
            let Some(old) = self.lists.front(H) else {
                break;
            };
            self.forget_history(old);
        }
    }

    fn forget_history(&mut self, id: u32) {
        if self.lists.aux(id) & NEW != 0 {
            self.c_new -= 1;
        }
        let key = self.lists.remove(id);
        self.node.remove(&key);
    }

    fn remember(&mut self, list: usize, key: u64) {
        if let Some(id) = self.ghost.remove(&key) {
            self.lists.remove(id);
        }
        let id = self.lists.push_back(list, key);
        self.ghost.insert(key, id);
        while self.lists.len(list) > (self.cap / 2).max(1) {
            if let Some(old) = self.lists.pop_front(list) {
                self.ghost.remove(&old);
            }
        }
    }

    fn evict(&mut self, evicted: &mut Vec<(u64, u32)>) {
        let lru = self.lists.front(SR).or_else(|| self.lists.front(R));
        let (Some(lru), Some(lfu_key)) = (lru, self.freq.first()) else {
            return;
        };
        let lru_key = self.lists.key(lru);
        let use_lru = ((self.next_u64() >> 11) % 100) as f64 / 100.0 < self.w_lru;
        let victim = if use_lru { lru_key } else { lfu_key };
        let Some(&id) = self.node.get(&victim) else {
            return;
        };
        self.send_to_history(id);
        evicted.push((victim, 0));
        if lru_key != lfu_key {
            self.remember(if use_lru { G_LRU } else { G_LFU }, victim);
        }
    }

    fn learn(&mut self, key: u64) {
        let Some(id) = self.ghost.remove(&key) else {
            return;
        };
        let mut w_lfu = 1.0 - self.w_lru;
        if self.lists.list_of(id) == G_LRU {
            self.w_lru *= (-self.lr).exp();
        } else {
            w_lfu *= (-self.lr).exp();
        }
        self.w_lru /= self.w_lru + w_lfu;
        self.lists.remove(id);
    }

    fn tick(&mut self) {
        self.time += 1;
        if self.cap == 0 || !self.time.is_multiple_of(self.cap as u64) {
            return;
        }
        let hr = self.window_hits as f64 / self.cap as f64;
        let d_hr = hr - self.hr_prev;
        let d_lr = self.lr - self.lr_prev;
        self.lr_prev = self.lr;
        self.hr_prev = hr;
        if d_lr != 0.0 {
            let sign = if d_hr / d_lr > 0.0 { 1.0 } else { -1.0 };
            self.lr = (self.lr + sign * (self.lr * d_lr).abs()).max(0.001);
            self.unlearn = 0;
        } else {
            if hr == 0.0 || d_hr <= 0.0 {
                self.unlearn += 1;
            }
            if self.unlearn >= 10 {
                self.unlearn = 0;
                self.lr = self.draw_lr();
            }
        }
        self.window_hits = 0;
    }
}

impl Policy for Cacheus {
    fn contains(&self, key: u64) -> bool {
        self.node
            .get(&key)
            .is_some_and(|&id| self.lists.list_of(id) <= R)
    }
    fn on_hit(&mut self, key: u64, _agg: u32) {
        let Some(&id) = self.node.get(&key) else {
            return;
        };
        let list = self.lists.list_of(id);
        if list > R {
            return;
        }
        self.tick();
        self.window_hits += 1;
        if list == SR {
            let demoted = self.lists.aux(id) & DEMOTED != 0;
            self.lists.move_back(id, H); // out of SR while R makes room
            self.make_room_in_r();
            self.lists.move_back(id, R);
            self.lists.set_aux(id, 0);
            if demoted {
                // SR held a key R needed: SR is too large.
                let step = (self.c_new / self.c_demoted.max(1)).max(1) as usize;
                self.sr_cap = self.sr_cap.saturating_sub(step).max(1);
                self.c_demoted -= 1;
            }
        } else {
            self.lists.move_back(id, R);
        }
        self.freq.add(key, 1, self.stamp());
    }
    fn on_miss(&mut self, key: u64, _agg: u32, evicted: &mut Vec<(u64, u32)>) {
        if self.cap == 0 || self.contains(key) {
            return;
        }
        self.tick();
        self.learn(key);
        if self.resident() >= self.cap {
            self.evict(evicted);
        }
        let before = self.resident();
        let mut f = 1;
        if let Some(&id) = self.node.get(&key) {
            // In H: back to R with its frequency; a key that left SR as new means SR is small.
            let aux = self.lists.aux(id);
            f = u64::from(aux >> FREQ_SHIFT) + 1;
            self.lists.move_back(id, SR); // out of H while R makes room
            self.make_room_in_r();
            self.lists.move_back(id, R);
            self.lists.set_aux(id, 0);
            if aux & NEW != 0 {
                self.c_new -= 1;
                let step = (self.c_demoted / self.c_new.max(1)).max(1) as usize;
                self.sr_cap = (self.sr_cap + step).min(before.saturating_sub(1).max(1));
            }
        } else {
            let id = self.lists.push_back(SR, key);
            self.lists.set_aux(id, NEW);
            self.node.insert(key, id);
        }
        self.freq.set(key, f, self.stamp());
        // SR beyond its share: its least recently used keys leave.
        while self.lists.len(SR) > self.sr_cap {
            let Some(id) = self.lists.front(SR) else {
                break;
            };
            let k = self.lists.key(id);
            self.send_to_history(id);
            evicted.push((k, 0));
        }
    }
    fn remove(&mut self, key: u64) -> bool {
        if !self.contains(key) {
            return false;
        }
        if let Some(id) = self.node.remove(&key) {
            if self.lists.aux(id) & DEMOTED != 0 {
                self.c_demoted -= 1;
            }
            self.lists.remove(id);
        }
        self.freq.remove(key);
        true
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
    fn cacheus_reused_keys_survive_a_scan() {
        let mut p = Cacheus::new(20);
        for _ in 0..10 {
            hits(&mut p, 0..5);
        }
        hits(&mut p, 1000..1100);
        assert!(p.len() <= 20);
        assert_eq!(
            hits(&mut p, 0..5),
            5,
            "R keeps the reused keys through a scan"
        );
    }

    #[test]
    fn cacheus_regret_lowers_the_weight_of_the_expert_that_evicted() {
        let mut p = Cacheus::new(50);
        let mut ev = Vec::new();
        hits(&mut p, 0..50);
        p.remember(G_LRU, 999); // as if SR-LRU alone had evicted 999
        p.access(999, &mut ev);
        assert!(p.lru_weight() < 0.5, "w_lru {}", p.lru_weight());
        p.remember(G_LFU, 998);
        let w = p.lru_weight();
        p.access(998, &mut ev);
        assert!(p.lru_weight() > w);
        assert!(p.len() <= 50);
    }

    #[test]
    fn cacheus_stays_within_capacity_and_sr_share_adapts_within_bounds() {
        let mut p = Cacheus::new(50);
        let mut ev = Vec::new();
        let mut x = 7u64;
        for i in 0..20_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let k = if i % 3 == 0 {
                (x >> 33) % 40
            } else {
                100 + (x >> 33) % 400
            };
            p.access(k, &mut ev);
            assert!(p.len() <= 50);
            assert!((1..50).contains(&p.sr_capacity()));
        }
    }
}
