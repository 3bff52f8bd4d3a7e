//! Hindsight: what each learned file's model cost to train and what it saved, kept so that a
//! run can say how little *any* analyzer could have learned at a given loss of lookup time.
//!
//! The analyzer decides before a file's lookups happen; hindsight sees them all. For every
//! learned file (retired, or live when asked) it records the training time `c` and the lookup
//! time its model saved `s` (model-path lookups × (baseline − model time), as in the
//! analyzer's realized benefit). An oracle that wants to learn as little as possible while
//! losing at most `L` ns of lookup time skips the files with the least saving per training
//! nanosecond first (a fractional knapsack, solved greedily): files whose model saved nothing,
//! then in ascending `s / c`. [`Hindsight::frontier`] lists that trade-off; a benchmark that
//! knows its foreground time turns it into "the least learning any analyzer could have done
//! at ≥ 95 % of always-learn's foreground throughput".
//!
//! Files are summed into buckets of `s / c` (a quarter octave wide, 2^-16 to 2^16; ratios
//! beyond go to the end buckets), so memory is fixed however many files a run learns; within
//! a bucket the ratio is taken as spread evenly, which bounds the error of the frontier by one
//! bucket's width (about 19 % in `s / c` at that point).
//!
//! Not thread-safe by itself; the analyzer keeps it under its lock.

/// Buckets per factor of two in `s / c`. Default 4: the frontier's ratio error stays under 19 %.
pub const BUCKETS_PER_OCTAVE: usize = 4;
/// Octaves either side of a ratio of 1 (models that saved 2^-16 to 2^16 of their cost).
const OCTAVES: i32 = 16;
const BUCKETS: usize = 2 * OCTAVES as usize * BUCKETS_PER_OCTAVE;

/// Training cost and saving of learned files, by saving per training nanosecond.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hindsight {
    /// Learned files accounted.
    pub files: u64,
    /// Training ns and saved ns of files whose model saved nothing (or lost time).
    idle_cost_ns: f64,
    idle_saved_ns: f64,
    /// Per bucket of `s / c` (empty until the first file).
    cost_ns: Vec<f64>,
    saved_ns: Vec<f64>,
}

/// One point of the oracle's trade-off: skipping models that saved `loss_ns` of lookup time
/// in total leaves `learn_ns` of training.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrontierPoint {
    pub loss_ns: f64,
    pub learn_ns: f64,
}

impl Hindsight {
    /// Accounts one learned file: `cost_ns` to train, `saved_ns` of lookup time saved. Files
    /// without a training cost (a model loaded from disk) are ignored: no analyzer pays for them.
    pub fn add(&mut self, cost_ns: f64, saved_ns: f64) {
        if !(cost_ns.is_finite() && cost_ns > 0.0 && saved_ns.is_finite()) {
            return;
        }
        self.files += 1;
        if saved_ns <= 0.0 {
            self.idle_cost_ns += cost_ns;
            self.idle_saved_ns += saved_ns;
            return;
        }
        if self.cost_ns.is_empty() {
            self.cost_ns = vec![0.0; BUCKETS];
            self.saved_ns = vec![0.0; BUCKETS];
        }
        let b = bucket(saved_ns / cost_ns);
        self.cost_ns[b] += cost_ns;
        self.saved_ns[b] += saved_ns;
    }

    /// Adds another hindsight's files (e.g. the live files to the retired ones).
    pub fn merge(&mut self, other: &Hindsight) {
        self.files += other.files;
        self.idle_cost_ns += other.idle_cost_ns;
        self.idle_saved_ns += other.idle_saved_ns;
        if other.cost_ns.is_empty() {
            return;
        }
        if self.cost_ns.is_empty() {
            self.cost_ns = vec![0.0; BUCKETS];
            self.saved_ns = vec![0.0; BUCKETS];
        }
        for b in 0..BUCKETS {
            self.cost_ns[b] += other.cost_ns[b];
            self.saved_ns[b] += other.saved_ns[b];
        }
    }

    /// Total training time of the accounted files.
    pub fn learn_ns(&self) -> f64 {
        self.idle_cost_ns + self.cost_ns.iter().sum::<f64>()
    }

    /// Total lookup time their models saved.
    pub fn saved_ns(&self) -> f64 {
        self.idle_saved_ns + self.saved_ns.iter().sum::<f64>()
    }

    /// The oracle's trade-off, from learning everything (loss 0) to learning nothing: one
    /// point after the idle models and after each non-empty bucket, ascending in loss.
    pub fn frontier(&self) -> Vec<FrontierPoint> {
        let mut learn = self.learn_ns();
        let mut out = vec![FrontierPoint {
            loss_ns: 0.0,
            learn_ns: learn,
        }];
        // Idle models lose nothing (or gain time) when skipped.
        learn -= self.idle_cost_ns;
        let mut loss = 0.0;
        out.push(FrontierPoint {
            loss_ns: loss,
            learn_ns: learn.max(0.0),
        });
        for (c, s) in self.cost_ns.iter().zip(&self.saved_ns) {
            if *c > 0.0 {
                learn -= c;
                loss += s;
                out.push(FrontierPoint {
                    loss_ns: loss,
                    learn_ns: learn.max(0.0),
                });
            }
        }
        out
    }

    /// The least training an oracle needs while losing at most `max_loss_ns` of lookup time
    /// (linear between frontier points: a bucket's files taken as spread evenly).
    pub fn min_learn_ns(&self, max_loss_ns: f64) -> f64 {
        min_learn_on(&self.frontier(), max_loss_ns)
    }
}

/// [`Hindsight::min_learn_ns`] on a frontier already listed (e.g. read back from a result row).
pub fn min_learn_on(frontier: &[FrontierPoint], max_loss_ns: f64) -> f64 {
    let mut best = frontier.first().map_or(0.0, |p| p.learn_ns);
    for w in frontier.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b.loss_ns <= max_loss_ns {
            best = b.learn_ns;
            continue;
        }
        if a.loss_ns <= max_loss_ns && b.loss_ns > a.loss_ns {
            let f = (max_loss_ns - a.loss_ns) / (b.loss_ns - a.loss_ns);
            best = a.learn_ns - f * (a.learn_ns - b.learn_ns);
        }
        break;
    }
    best
}

fn bucket(ratio: f64) -> usize {
    let x =
        ratio.log2() * BUCKETS_PER_OCTAVE as f64 + (OCTAVES as usize * BUCKETS_PER_OCTAVE) as f64;
    if x.is_nan() || x < 0.0 {
        0
    } else {
        (x as usize).min(BUCKETS - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oracle_skips_the_least_saving_per_training_nanosecond_first() {
        let mut h = Hindsight::default();
        h.add(100.0, 0.0); // saved nothing: free to skip
        h.add(100.0, 50.0); // ratio 0.5
        h.add(100.0, 400.0); // ratio 4
        h.add(100.0, 1600.0); // ratio 16
        assert_eq!(h.files, 4);
        assert_eq!(h.learn_ns(), 400.0);
        assert_eq!(h.saved_ns(), 2050.0);
        // No loss allowed: the idle model still goes.
        assert_eq!(h.min_learn_ns(0.0), 300.0);
        // 50 ns of loss: the ratio-0.5 model goes too.
        assert_eq!(h.min_learn_ns(50.0), 200.0);
        // Half of the ratio-4 model's saving: half of its cost (linear within the step).
        assert_eq!(h.min_learn_ns(250.0), 150.0);
        assert_eq!(h.min_learn_ns(1e9), 0.0);
        let f = h.frontier();
        assert!(f.windows(2).all(|w| w[1].loss_ns >= w[0].loss_ns));
        assert!(f.windows(2).all(|w| w[1].learn_ns <= w[0].learn_ns));
    }

    #[test]
    fn loaded_models_and_bad_numbers_are_not_counted() {
        let mut h = Hindsight::default();
        h.add(0.0, 500.0);
        h.add(f64::NAN, 1.0);
        h.add(10.0, f64::INFINITY);
        assert_eq!(h.files, 0);
        assert_eq!(h.min_learn_ns(0.0), 0.0);
        assert_eq!(h.frontier().len(), 2);
    }

    #[test]
    fn merged_hindsight_equals_one_built_from_all_files() {
        let files = [(50.0, 10.0), (70.0, 700.0), (30.0, -5.0), (90.0, 1e6)];
        let (mut all, mut a, mut b) = Default::default();
        for (i, &(c, s)) in files.iter().enumerate() {
            Hindsight::add(&mut all, c, s);
            Hindsight::add(if i % 2 == 0 { &mut a } else { &mut b }, c, s);
        }
        let mut m: Hindsight = a;
        m.merge(&b);
        assert_eq!(m, all);
        let empty = Hindsight::default();
        m.merge(&empty);
        assert_eq!(m, all);
    }

    #[test]
    fn extreme_ratios_land_in_the_end_buckets() {
        assert_eq!(bucket(0.0), 0);
        assert_eq!(bucket(1e-30), 0);
        assert_eq!(bucket(1e30), BUCKETS - 1);
        assert_eq!(bucket(1.0), OCTAVES as usize * BUCKETS_PER_OCTAVE);
        assert!(bucket(1.1) == bucket(1.0) && bucket(1.2) > bucket(1.0));
    }
}
