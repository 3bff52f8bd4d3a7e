//! Small statistics for the device profiler: means, Welch's t statistic and a two-sided p-value
//! (normal approximation, which is what the profiler's sample sizes of 8 and more allow at the
//! thresholds it uses).
//!
//! Thread-safety: pure functions.

/// Mean and sample variance of `x` (0, 0 for an empty slice; variance 0 for one sample).
pub fn mean_var(x: &[f64]) -> (f64, f64) {
    if x.is_empty() {
        return (0.0, 0.0);
    }
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    if x.len() < 2 {
        return (m, 0.0);
    }
    let v = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1.0);
    (m, v)
}

/// Mean of `x` (0 for an empty slice).
pub fn mean(x: &[f64]) -> f64 {
    mean_var(x).0
}

/// Welch's t statistic of `mean(a) - mean(b)`. Two groups without spread give ±infinity when
/// their means differ and 0 when they are equal (a deterministic device).
pub fn welch_t(a: &[f64], b: &[f64]) -> f64 {
    let (ma, va) = mean_var(a);
    let (mb, vb) = mean_var(b);
    let se2 = va / a.len().max(1) as f64 + vb / b.len().max(1) as f64;
    let d = ma - mb;
    if se2 <= 0.0 {
        // Differences below a nanosecond are equality on a deterministic device.
        return if d.abs() < 1.0 {
            0.0
        } else {
            d.signum() * f64::INFINITY
        };
    }
    d / se2.sqrt()
}

/// Paired t statistic of the differences `a[i] - b[i]` (the shorter length counts); ±infinity
/// for differences without spread and a non-zero mean.
pub fn paired_t(a: &[f64], b: &[f64]) -> f64 {
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    let (m, v) = mean_var(&d);
    if v <= 0.0 {
        return if m.abs() < 1.0 {
            0.0
        } else {
            m.signum() * f64::INFINITY
        };
    }
    m / (v / d.len() as f64).sqrt()
}

/// Two-sided p-value of a t statistic under the normal approximation.
pub fn p_two_sided(t: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    erfc(t.abs() / std::f64::consts::SQRT_2)
}

/// Complementary error function (Numerical Recipes' Chebyshev fit, relative error < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welch_and_p_values() {
        assert_eq!(welch_t(&[1.0, 1.0], &[1.0, 1.0]), 0.0);
        assert_eq!(welch_t(&[1.0, 1.0], &[5.0, 5.0]), f64::NEG_INFINITY);
        assert_eq!(p_two_sided(f64::INFINITY), 0.0);
        assert!((p_two_sided(1.959_964) - 0.05).abs() < 1e-4);
        assert!((p_two_sided(0.0) - 1.0).abs() < 1e-6);
        let t = welch_t(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
        assert!((t + 3.674_234_6).abs() < 1e-6, "{t}");
        assert_eq!(paired_t(&[3.0, 5.0], &[1.0, 3.0]), f64::INFINITY);
        let t = paired_t(&[3.0, 6.0, 4.0], &[1.0, 3.0, 3.0]);
        assert!((t - 3.464_101_6).abs() < 1e-6, "{t}");
    }
}
