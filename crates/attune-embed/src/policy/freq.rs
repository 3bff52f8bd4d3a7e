//! Keys ordered by `(value, stamp)`: the lowest value first, ties to the lowest stamp. The one
//! ordered-frequency structure behind LFU (count, last use), EV-LFU-sum (accumulated group
//! score, last use), LeCaR's LFU expert and Cacheus's CR-LFU (count, reversed last use).
//! O(log n) per update. Thread-safety: owned by one thread (`Send`).

use std::collections::BTreeSet;

use super::{map, Map};

/// See the module doc.
pub struct FreqOrder {
    order: BTreeSet<(u64, u64, u64)>,
    meta: Map<(u64, u64)>,
}

impl Default for FreqOrder {
    fn default() -> Self {
        FreqOrder {
            order: BTreeSet::new(),
            meta: map(),
        }
    }
}

impl FreqOrder {
    /// Whether `key` is ordered.
    #[inline]
    pub fn contains(&self, key: u64) -> bool {
        self.meta.contains_key(&key)
    }

    /// The key's value, if ordered.
    #[inline]
    pub fn value(&self, key: u64) -> Option<u64> {
        self.meta.get(&key).map(|m| m.0)
    }

    /// Keys ordered.
    #[inline]
    pub fn len(&self) -> usize {
        self.meta.len()
    }

    /// Whether nothing is ordered.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.meta.is_empty()
    }

    /// Inserts `key` (or replaces its entry) at `(value, stamp)`.
    pub fn set(&mut self, key: u64, value: u64, stamp: u64) {
        if let Some(old) = self.meta.insert(key, (value, stamp)) {
            self.order.remove(&(old.0, old.1, key));
        }
        self.order.insert((value, stamp, key));
    }

    /// Adds `delta` to an ordered key's value and sets its stamp; false if not ordered.
    pub fn add(&mut self, key: u64, delta: u64, stamp: u64) -> bool {
        let Some(m) = self.meta.get_mut(&key) else {
            return false;
        };
        self.order.remove(&(m.0, m.1, key));
        *m = (m.0.saturating_add(delta), stamp);
        self.order.insert((m.0, m.1, key));
        true
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: u64) -> Option<u64> {
        let m = self.meta.remove(&key)?;
        self.order.remove(&(m.0, m.1, key));
        Some(m.0)
    }

    /// The first key (lowest value, then lowest stamp).
    #[inline]
    pub fn first(&self) -> Option<u64> {
        self.order.first().map(|e| e.2)
    }

    /// The keys, lowest value first.
    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.order.iter().map(|e| e.2)
    }

    /// Removes the first key; returns it with its value.
    pub fn pop_first(&mut self) -> Option<(u64, u64)> {
        let (v, _, k) = self.order.pop_first()?;
        self.meta.remove(&k);
        Some((k, v))
    }
}
