//! The directory a benchmark run works in: one the user named with `--dir` (kept; only what
//! the runs put in it goes), or a fresh `attune-bench-<tag>-<pid>` under a scratch directory,
//! removed whole when the run ends, returns an error or unwinds.

use crate::output::Fail;
use std::path::{Path, PathBuf};

pub struct RunDir {
    path: PathBuf,
    /// Made by this run (removed whole at the end) rather than named by the user.
    owned: bool,
}

impl RunDir {
    /// `given`, created if missing, or a fresh directory for `tag` under the system's temporary
    /// directory (`TMPDIR`, else `/tmp`).
    pub fn new(given: Option<PathBuf>, tag: &str) -> Result<RunDir, Fail> {
        match given {
            Some(p) => RunDir::make(p, false),
            None => RunDir::fresh_in(&std::env::temp_dir(), tag),
        }
    }

    /// A fresh directory for `tag` under `base`, removed whole at the end.
    pub fn fresh_in(base: &Path, tag: &str) -> Result<RunDir, Fail> {
        let p = base.join(format!("attune-bench-{tag}-{}", std::process::id()));
        RunDir::make(p, true)
    }

    fn make(path: PathBuf, owned: bool) -> Result<RunDir, Fail> {
        std::fs::create_dir_all(&path)
            .map_err(|e| Fail::from(format!("mkdir {}: {e}", path.display())))?;
        Ok(RunDir { path, owned })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if self.owned {
            let _ = std::fs::remove_dir_all(&self.path);
        } else {
            // The user's directory stays; it goes only if the run left it empty.
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}
