//! Errors of the workload crate: one enum, one variant per kind of mistake.
//!
//! Every constructor validates its parameters before doing any work and returns
//! [`WorkloadError`]; generators never panic on bad input. Trace decoders report
//! corruption with the byte offset at which it was found.
//!
//! Thread-safety: plain data (`Send + Sync`).

use thiserror::Error;

/// Everything that can go wrong when building a workload or reading a trace.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// A numeric parameter is outside its allowed range.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Parameter name as the user spells it.
        name: &'static str,
        /// The offending value, formatted.
        value: String,
        /// What the allowed range is.
        reason: &'static str,
    },
    /// Operation proportions do not sum to 1 (within 1e-9).
    #[error("proportions must sum to 1, got {sum} ({detail})")]
    ProportionsDoNotSumToOne {
        /// The sum found.
        sum: f64,
        /// Which proportions were given.
        detail: String,
    },
    /// A key set, distribution or workload was asked for with zero items.
    #[error("`{name}` must be at least 1, got 0")]
    Empty {
        /// Parameter name.
        name: &'static str,
    },
    /// A name (key set, distribution, workload letter, ...) was not recognised.
    #[error("unknown {kind} `{given}`; valid: {valid}")]
    UnknownName {
        /// What kind of name was being parsed.
        kind: &'static str,
        /// The input.
        given: String,
        /// The valid spellings.
        valid: &'static str,
    },
    /// A name was recognised but its `:`-separated arguments were malformed.
    #[error("bad arguments for {kind} `{given}`: {reason}")]
    BadArguments {
        /// What kind of name was being parsed.
        kind: &'static str,
        /// The input.
        given: String,
        /// What was wrong.
        reason: String,
    },
    /// A trace file is corrupt at the given byte offset.
    #[error("corrupt block trace at byte {offset}: {reason}")]
    CorruptTrace {
        /// Byte offset in the input where the problem was detected.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// A trace file ended before its footer.
    #[error("truncated block trace: input ends at byte {offset} while {expecting}")]
    TruncatedTrace {
        /// Byte offset of the end of input.
        offset: u64,
        /// What the reader was expecting.
        expecting: &'static str,
    },
    /// A CSV trace line could not be parsed.
    #[error("bad CSV trace line {line}: {reason}")]
    BadCsv {
        /// 1-based line number.
        line: u64,
        /// What was wrong.
        reason: String,
    },
    /// An I/O error while reading or writing a trace.
    #[error("trace I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, WorkloadError>;

/// Checks that `x` is finite and `>= 0`; `name` is used in the error.
pub(crate) fn check_nonneg(name: &'static str, x: f64) -> Result<()> {
    if x.is_finite() && x >= 0.0 {
        Ok(())
    } else {
        Err(WorkloadError::InvalidParameter {
            name,
            value: format!("{x}"),
            reason: "must be a finite number >= 0",
        })
    }
}

/// Checks that `x` is a probability in [0, 1].
pub(crate) fn check_fraction(name: &'static str, x: f64) -> Result<()> {
    if x.is_finite() && (0.0..=1.0).contains(&x) {
        Ok(())
    } else {
        Err(WorkloadError::InvalidParameter {
            name,
            value: format!("{x}"),
            reason: "must be in [0, 1]",
        })
    }
}

/// Checks that a count is non-zero.
pub(crate) fn check_nonzero(name: &'static str, n: u64) -> Result<()> {
    if n == 0 {
        Err(WorkloadError::Empty { name })
    } else {
        Ok(())
    }
}

/// Checks that proportions are each in [0,1] and sum to 1 within 1e-9.
pub(crate) fn check_proportions(parts: &[(&'static str, f64)]) -> Result<()> {
    let mut sum = 0.0;
    for &(name, p) in parts {
        check_fraction(name, p)?;
        sum += p;
    }
    if (sum - 1.0).abs() > 1e-9 {
        let detail = parts
            .iter()
            .map(|(n, p)| format!("{n}={p}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(WorkloadError::ProportionsDoNotSumToOne { sum, detail });
    }
    Ok(())
}
