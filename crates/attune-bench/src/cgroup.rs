//! `--memory-limit`: runs each engine's process inside a memory cgroup, when the machine allows.
//!
//! * cgroup v2 (`/sys/fs/cgroup/cgroup.controllers` exists): a child group
//!   `attune-bench-<pid>` under this process's own group with `memory.max` (and
//!   `memory.swap.max = 0`); this needs the memory controller delegated to our group.
//! * cgroup v1 with a writable memory hierarchy (`/sys/fs/cgroup/memory`): the same child group
//!   under our own memory group with `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`
//!   when swap accounting exists).
//!
//! The group is always nested under our own group, never at the root, so the limit only narrows
//! what the machine already allows. When neither works, [`Limit::create`] returns the reason and
//! the harness records `"memory_limit": {"enforced": false, "reason": ...}` in every row.
//!
//! Thread-safety: a [`Limit`] is created once by the parent and only read afterwards. Invariant:
//! the group is removed when the `Limit` is dropped (after its processes exited).

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{BenchError, Result};

const ROOT: &str = "/sys/fs/cgroup";

/// A memory-limited cgroup.
#[derive(Debug)]
pub struct Limit {
    path: PathBuf,
    bytes: u64,
    version: u8,
}

/// This process's group path in hierarchy `pick` of /proc/self/cgroup.
fn own_group(pick: impl Fn(&str) -> bool) -> Option<String> {
    fs::read_to_string("/proc/self/cgroup")
        .ok()?
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, ctl, path) = (parts.next()?, parts.next()?, parts.next()?);
            pick(ctl).then(|| path.trim_start_matches('/').to_string())
        })
}

fn make(
    parent: &Path,
    files: &[(&str, String)],
    optional: &[(&str, String)],
) -> std::result::Result<PathBuf, String> {
    let path = parent.join(format!("attune-bench-{}", std::process::id()));
    fs::create_dir(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    for (name, value) in files {
        if let Err(e) = fs::write(path.join(name), value) {
            let _ = fs::remove_dir(&path);
            return Err(format!("cannot write {}/{name}: {e}", path.display()));
        }
    }
    for (name, value) in optional {
        let _ = fs::write(path.join(name), value);
    }
    Ok(path)
}

impl Limit {
    /// Creates the group with the limit, or says why it cannot.
    pub fn create(bytes: u64) -> std::result::Result<Limit, String> {
        let root = Path::new(ROOT);
        if let Ok(controllers) = fs::read_to_string(root.join("cgroup.controllers")) {
            if !controllers.split_whitespace().any(|c| c == "memory") {
                return Err("cgroup v2: the memory controller is not available".into());
            }
            let own = root.join(own_group(|c| c.is_empty()).unwrap_or_default());
            let _ = fs::write(own.join("cgroup.subtree_control"), "+memory");
            let path = make(
                &own,
                &[("memory.max", bytes.to_string())],
                &[("memory.swap.max", "0".to_string())],
            )
            .map_err(|e| {
                format!("cgroup v2: memory controller not delegated to our group ({e})")
            })?;
            return Ok(Limit {
                path,
                bytes,
                version: 2,
            });
        }
        let v1 = root.join("memory");
        if v1.join("cgroup.procs").exists() {
            let own =
                v1.join(own_group(|c| c.split(',').any(|x| x == "memory")).unwrap_or_default());
            let path = make(
                &own,
                &[("memory.limit_in_bytes", bytes.to_string())],
                &[("memory.memsw.limit_in_bytes", bytes.to_string())],
            )
            .map_err(|e| format!("cgroup v1 memory hierarchy not writable ({e})"))?;
            return Ok(Limit {
                path,
                bytes,
                version: 1,
            });
        }
        Err("no cgroup memory controller is mounted at /sys/fs/cgroup".into())
    }

    /// Moves process `pid` into the group.
    pub fn add_pid(&self, pid: u32) -> Result<()> {
        let procs = self.procs_file();
        fs::write(&procs, pid.to_string()).map_err(|e| BenchError::io("write", procs, e))
    }

    /// The file a process writes its pid to in order to join.
    pub fn procs_file(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    /// The limit in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The group's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// 1 or 2.
    pub fn version(&self) -> u8 {
        self.version
    }
}

impl Drop for Limit {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.path);
    }
}
