//! Choosing the next record of a k-way merge: a loser tree (Knuth, TAOCP vol. 3, §5.4.1, "tree
//! of losers"), a binary heap, or a linear scan of the heads.
//!
//! Every source's head is one `u128`: its 80-bit key shifted left by 32 with the source's index
//! in the low bits, so one integer comparison orders keys and breaks ties by source (the merge is
//! stable: equal keys leave in source order). An exhausted source's head is [`DONE`], above
//! every real head.
//!
//! - **Loser tree**: the k heads are the leaves of a complete binary tree; each
//!   internal node keeps the loser of the match played there and the overall winner sits above
//!   the root. Replacing the winner's head replays only the matches on its leaf-to-root path:
//!   ⌈log₂ k⌉ comparisons per record, no choice of which child to follow (the path is the
//!   leaf's index halved) and each match's outcome taken by a select rather than a branch.
//!   A heap's sift-down also costs about log₂ k comparisons with `std`'s hole technique; a scan
//!   costs k. Measured: `attune-bench pipes merge` (docs/data-pipes.md).
//! - **Heap** (default): `std`'s `BinaryHeap`, the winner replaced in place (one sift-down).
//!   It spends 8–21 % less CPU per record than the loser tree at k = 4–64 on this machine
//!   (the tree wins only at k = 2), so it is the default; the tree is the ablation.
//! - **Scan**: the minimum of the k heads, found by looking at all of them (the merge before the
//!   loser tree).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The head of an exhausted source: above every real head.
pub const DONE: u128 = u128::MAX;

/// How a merge picks its next record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MergeSelect {
    /// A tree of losers: ⌈log₂ k⌉ comparisons per record.
    LoserTree,
    /// A binary heap: one sift-down per record (the default).
    #[default]
    Heap,
    /// A scan of every head: k comparisons per record.
    Scan,
}

impl MergeSelect {
    /// The name used by options, reports and benchmarks.
    pub fn name(self) -> &'static str {
        match self {
            MergeSelect::LoserTree => "loser-tree",
            MergeSelect::Heap => "heap",
            MergeSelect::Scan => "scan",
        }
    }

    /// Parses a name of [`MergeSelect::name`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "loser-tree" | "loser_tree" | "tree" => Some(MergeSelect::LoserTree),
            "heap" => Some(MergeSelect::Heap),
            "scan" => Some(MergeSelect::Scan),
            _ => None,
        }
    }
}

/// A head: `key << 32 | source`.
#[inline]
pub fn head(key: u128, source: usize) -> u128 {
    key << 32 | source as u128
}

/// The source of a head.
#[inline]
pub fn source_of(head: u128) -> usize {
    (head as u32) as usize
}

/// The k heads of a merge, organised to give the smallest one.
pub enum Selector {
    /// `nodes[1..k]` hold the losers of the internal matches; `nodes[0]` the winner.
    Tree { nodes: Vec<u128>, k: usize },
    /// Heads of the sources not yet exhausted.
    Heap(BinaryHeap<Reverse<u128>>),
    /// Every source's head and the current minimum.
    Scan { heads: Vec<u128>, min: u128 },
}

impl Selector {
    /// Builds a selector over `heads` (one per source, [`DONE`] for an empty source; source `i`'s
    /// head must carry `i` in its low 32 bits, see [`head`]). At most 2³² sources.
    pub fn new(kind: MergeSelect, heads: &[u128]) -> Self {
        match kind {
            MergeSelect::LoserTree => {
                let k = heads.len();
                let mut nodes = vec![DONE; k.max(1)];
                if k > 0 {
                    // Winners of every subtree, bottom-up: leaves at k..2k, internal 1..k.
                    let mut win = vec![DONE; 2 * k];
                    win[k..].copy_from_slice(heads);
                    for n in (1..k).rev() {
                        let (a, b) = (win[2 * n], win[2 * n + 1]);
                        win[n] = a.min(b);
                        nodes[n] = a.max(b);
                    }
                    nodes[0] = win[1];
                }
                Selector::Tree { nodes, k }
            }
            MergeSelect::Heap => Selector::Heap(
                heads
                    .iter()
                    .filter(|&&h| h != DONE)
                    .map(|&h| Reverse(h))
                    .collect(),
            ),
            MergeSelect::Scan => Selector::Scan {
                heads: heads.to_vec(),
                min: heads.iter().copied().min().unwrap_or(DONE),
            },
        }
    }

    /// The smallest head ([`DONE`] when every source is exhausted).
    #[inline]
    pub fn top(&self) -> u128 {
        match self {
            Selector::Tree { nodes, .. } => nodes[0],
            Selector::Heap(h) => h.peek().map_or(DONE, |r| r.0),
            Selector::Scan { min, .. } => *min,
        }
    }

    /// Replaces the head of the top's source with `next` (that source's next head, or [`DONE`]
    /// when it is exhausted). The top must not be [`DONE`].
    #[inline]
    pub fn replace_top(&mut self, next: u128) {
        match self {
            Selector::Tree { nodes, k } => {
                let src = source_of(nodes[0]);
                let mut cur = next;
                // Replay the matches from the leaf's parent to the root: the loser stays.
                let mut n = (*k + src) >> 1;
                while n > 0 {
                    // Which of the two wins is data: a select, not a branch to mispredict.
                    let other = nodes[n];
                    let swap = other < cur;
                    nodes[n] = std::hint::select_unpredictable(swap, cur, other);
                    cur = std::hint::select_unpredictable(swap, other, cur);
                    n >>= 1;
                }
                nodes[0] = cur;
            }
            Selector::Heap(h) => {
                if next == DONE {
                    h.pop();
                } else if let Some(mut top) = h.peek_mut() {
                    top.0 = next;
                }
            }
            Selector::Scan { heads, min } => {
                heads[source_of(*min)] = next;
                *min = heads.iter().copied().min().unwrap_or(DONE);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64: deterministic cases without a dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Merges sorted key lists through a selector; returns (key, source) in output order.
    fn merge(kind: MergeSelect, runs: &[Vec<u128>]) -> Vec<(u128, usize)> {
        let heads: Vec<u128> = runs
            .iter()
            .enumerate()
            .map(|(i, r)| r.first().map_or(DONE, |&k| head(k, i)))
            .collect();
        let mut pos = vec![0usize; runs.len()];
        let mut sel = Selector::new(kind, &heads);
        let mut out = Vec::new();
        loop {
            let t = sel.top();
            if t == DONE {
                break;
            }
            let s = source_of(t);
            out.push((t >> 32, s));
            pos[s] += 1;
            sel.replace_top(runs[s].get(pos[s]).map_or(DONE, |&k| head(k, s)));
        }
        out
    }

    #[test]
    fn every_selector_merges_like_a_stable_sort_for_fan_in_1_to_64() {
        let mut rng = Rng(7);
        for k in 1..=64usize {
            for case in 0..6 {
                // Narrow key ranges make many ties; some runs are empty.
                let range = [2u64, 16, 1 << 40][case % 3];
                let runs: Vec<Vec<u128>> = (0..k)
                    .map(|_| {
                        let n = match rng.below(5) {
                            0 => 0,
                            1 => 1,
                            _ => rng.below(40) as usize,
                        };
                        let mut r: Vec<u128> =
                            (0..n).map(|_| u128::from(rng.below(range))).collect();
                        r.sort_unstable();
                        r
                    })
                    .collect();
                let mut want: Vec<(u128, usize)> = runs
                    .iter()
                    .enumerate()
                    .flat_map(|(i, r)| r.iter().map(move |&key| (key, i)))
                    .collect();
                want.sort(); // by key, then source: the stable merge's order
                for kind in [MergeSelect::LoserTree, MergeSelect::Heap, MergeSelect::Scan] {
                    assert_eq!(merge(kind, &runs), want, "k={k} case={case} {kind:?}");
                }
            }
        }
    }

    #[test]
    fn all_empty_and_no_sources_give_nothing() {
        for kind in [MergeSelect::LoserTree, MergeSelect::Heap, MergeSelect::Scan] {
            assert!(merge(kind, &[]).is_empty());
            assert!(merge(kind, &[vec![], vec![], vec![]]).is_empty());
            assert_eq!(
                merge(kind, &[vec![], vec![5, 5], vec![]]),
                vec![(5, 1), (5, 1)]
            );
        }
    }

    #[test]
    fn the_largest_keys_are_not_mistaken_for_exhausted_sources() {
        let max = (1u128 << 80) - 1;
        for kind in [MergeSelect::LoserTree, MergeSelect::Heap, MergeSelect::Scan] {
            assert_eq!(
                merge(kind, &[vec![max], vec![0, max]]),
                vec![(0, 1), (max, 0), (max, 1)]
            );
        }
    }

    #[test]
    fn names_round_trip() {
        for kind in [MergeSelect::LoserTree, MergeSelect::Heap, MergeSelect::Scan] {
            assert_eq!(MergeSelect::parse(kind.name()), Some(kind));
        }
        assert_eq!(MergeSelect::parse("bogus"), None);
    }
}
