//! Small statistics for the device profiler: means, Welch's and the paired t statistic with their
//! degrees of freedom, and two-sided p-values from Student's t distribution (the regularised
//! incomplete beta function), so that four samples per group are not treated as forty.
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

/// Welch–Satterthwaite degrees of freedom of `a` against `b` (infinite without spread).
pub fn welch_df(a: &[f64], b: &[f64]) -> f64 {
    let (_, va) = mean_var(a);
    let (_, vb) = mean_var(b);
    let (na, nb) = (a.len().max(2) as f64, b.len().max(2) as f64);
    let (qa, qb) = (va / na, vb / nb);
    let den = qa * qa / (na - 1.0) + qb * qb / (nb - 1.0);
    if den <= 0.0 {
        return f64::INFINITY;
    }
    (qa + qb) * (qa + qb) / den
}

/// Two-sided p-value of `t` under Student's t with `df` degrees of freedom (the normal
/// distribution for infinite `df`).
pub fn student_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    if !df.is_finite() || df > 1e6 {
        return p_two_sided(t);
    }
    let df = df.max(1.0);
    beta_reg(df / 2.0, 0.5, df / (df + t * t))
}

fn ln_gamma(x: f64) -> f64 {
    // Lanczos (g = 7, n = 9), accurate to ~1e-15 for x > 0.
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Regularised incomplete beta I_x(a, b) (Numerical Recipes' continued fraction).
fn beta_reg(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-14 {
            break;
        }
    }
    h
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
        // Student's t: p(|T| > 2.776) = 0.05 at 4 df, p(|T| > 12.706) = 0.05 at 1 df.
        assert!((student_p(2.776_445, 4.0) - 0.05).abs() < 1e-5);
        assert!((student_p(12.706_2, 1.0) - 0.05).abs() < 1e-5);
        assert!((student_p(1.96, f64::INFINITY) - 0.05).abs() < 1e-3);
        assert!((welch_df(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]) - 4.0).abs() < 1e-9);
        let t = paired_t(&[3.0, 6.0, 4.0], &[1.0, 3.0, 3.0]);
        assert!((t - 3.464_101_6).abs() < 1e-6, "{t}");
    }
}
