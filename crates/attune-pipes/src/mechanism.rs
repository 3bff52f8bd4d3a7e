//! Mechanisms and the runtime's choice among them.
//!
//! The choice is a pure function of what was asked and what the kernel allowed
//! ([`choose`]), so that every fallback is tested without a kernel that refuses.
//!
//! Rules (docs/data-pipes.md, "Choice rules"):
//! * memory to memory is always a `memcpy` (no system call would move it faster here);
//! * `Auto` takes io_uring when a ring can be set up, else pread/pwrite threads, else mmap copies,
//!   and records each fallback with the kernel's reason;
//! * an explicit mechanism the kernel refuses is an error, not a fallback: the caller declared
//!   that path, so silently serving another would hide it (the chapter's "reject" principle);
//! * registered buffers and fixed files are optional within io_uring: refused (a small
//!   locked-memory limit, a buffer over the kernel's 1 GiB, slots exhausted), the pipe uses
//!   plain reads and writes on the same ring and its state says why.

use crate::error::{Error, Result};

/// How data moves between a file and memory (or memory and memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Mechanism {
    /// io_uring submissions (registered buffers and fixed files where the kernel allows).
    #[cfg_attr(feature = "serde", serde(rename = "io_uring"))]
    IoUring,
    /// A pool of threads calling pread/pwrite, one request per thread.
    #[cfg_attr(feature = "serde", serde(rename = "threads"))]
    Threads,
    /// The file mapped and copied with memcpy (buffered files only).
    #[cfg_attr(feature = "serde", serde(rename = "mmap"))]
    Mmap,
    /// Memory to memory: memcpy.
    #[cfg_attr(feature = "serde", serde(rename = "memcpy"))]
    Memcpy,
}

impl Mechanism {
    /// The name used in options, reports and benchmark rows.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::IoUring => "io_uring",
            Mechanism::Threads => "threads",
            Mechanism::Mmap => "mmap",
            Mechanism::Memcpy => "memcpy",
        }
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the caller asks of the runtime for file pipes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MechanismChoice {
    /// io_uring, then threads, then mmap: the first the kernel allows (the default).
    #[default]
    Auto,
    /// Exactly this mechanism, or an error.
    Only(Mechanism),
}

impl std::str::FromStr for MechanismChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "auto" => MechanismChoice::Auto,
            "io_uring" | "uring" => MechanismChoice::Only(Mechanism::IoUring),
            "threads" | "pread" => MechanismChoice::Only(Mechanism::Threads),
            "mmap" => MechanismChoice::Only(Mechanism::Mmap),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown mechanism `{other}`; valid: auto, io_uring, threads, mmap"
                )))
            }
        })
    }
}

/// What setting up each mechanism gave (`Err` holds the kernel's reason).
#[derive(Clone, Debug)]
pub struct Probe {
    pub io_uring: std::result::Result<(), String>,
    pub threads: std::result::Result<(), String>,
}

/// The runtime's file mechanism for `choice` given `probe`, and the fallbacks taken on the way.
pub fn choose(choice: MechanismChoice, probe: &Probe) -> Result<(Mechanism, Vec<String>)> {
    match choice {
        MechanismChoice::Only(Mechanism::Memcpy) => Err(Error::InvalidArgument(
            "memcpy moves memory to memory only; choose a file mechanism".into(),
        )),
        MechanismChoice::Only(m) => {
            let refused = match m {
                Mechanism::IoUring => probe.io_uring.as_ref().err(),
                Mechanism::Threads => probe.threads.as_ref().err(),
                _ => None,
            };
            match refused {
                Some(reason) => Err(Error::Unsupported {
                    path: format!("file <-> memory by {m}"),
                    reason: format!("the kernel refused {m}: {reason}"),
                }),
                None => Ok((m, Vec::new())),
            }
        }
        MechanismChoice::Auto => {
            let mut fallbacks = Vec::new();
            match &probe.io_uring {
                Ok(()) => return Ok((Mechanism::IoUring, fallbacks)),
                Err(r) => fallbacks.push(format!("io_uring refused ({r}); using threads")),
            }
            match &probe.threads {
                Ok(()) => return Ok((Mechanism::Threads, fallbacks)),
                Err(r) => fallbacks.push(format!("threads refused ({r}); using mmap")),
            }
            Ok((Mechanism::Mmap, fallbacks))
        }
    }
}

/// Largest buffer io_uring registers (the kernel's limit per buffer, 1 GiB).
pub const REGISTERED_BUFFER_BYTES_MAX: u64 = 1 << 30;

/// Whether a memory of `bytes` can be a registered buffer, and why not.
pub fn registrable(bytes: u64, slots_free: usize) -> std::result::Result<(), String> {
    if bytes > REGISTERED_BUFFER_BYTES_MAX {
        return Err(format!(
            "{bytes} bytes exceed io_uring's 1 GiB per registered buffer"
        ));
    }
    if slots_free == 0 {
        return Err("every registered-buffer slot is in use".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(uring: bool, threads: bool) -> Probe {
        Probe {
            io_uring: if uring { Ok(()) } else { Err("EPERM".into()) },
            threads: if threads {
                Ok(())
            } else {
                Err("EAGAIN".into())
            },
        }
    }

    #[test]
    fn auto_prefers_io_uring() {
        let (m, fb) = choose(MechanismChoice::Auto, &probe(true, true)).unwrap();
        assert_eq!(m, Mechanism::IoUring);
        assert!(fb.is_empty());
    }

    #[test]
    fn auto_falls_back_to_threads_and_reports_why() {
        let (m, fb) = choose(MechanismChoice::Auto, &probe(false, true)).unwrap();
        assert_eq!(m, Mechanism::Threads);
        assert_eq!(fb.len(), 1);
        assert!(fb[0].contains("io_uring refused (EPERM)"), "{fb:?}");
    }

    #[test]
    fn auto_falls_back_to_mmap_last() {
        let (m, fb) = choose(MechanismChoice::Auto, &probe(false, false)).unwrap();
        assert_eq!(m, Mechanism::Mmap);
        assert_eq!(fb.len(), 2);
    }

    #[test]
    fn an_explicit_mechanism_the_kernel_refuses_is_rejected() {
        let err = choose(
            MechanismChoice::Only(Mechanism::IoUring),
            &probe(false, true),
        );
        match err {
            Err(Error::Unsupported { reason, .. }) => assert!(reason.contains("EPERM")),
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }

    #[test]
    fn registration_refuses_huge_buffers_and_full_tables() {
        assert!(registrable(1 << 20, 3).is_ok());
        assert!(registrable((1 << 30) + 4096, 3)
            .unwrap_err()
            .contains("1 GiB"));
        assert!(registrable(4096, 0).unwrap_err().contains("slot"));
    }

    #[test]
    fn mechanism_names_parse() {
        assert_eq!(
            "auto".parse::<MechanismChoice>().unwrap(),
            MechanismChoice::Auto
        );
        assert_eq!(
            "threads".parse::<MechanismChoice>().unwrap(),
            MechanismChoice::Only(Mechanism::Threads)
        );
        assert!("dma".parse::<MechanismChoice>().is_err());
    }
}
