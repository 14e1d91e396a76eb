//! An interrupted reconfiguration resumes after a restart. While a reconfiguration runs,
//! its plan is kept in a file beside the image (`IMAGE.reconfig`, sealed with a checksum
//! and a format version, written whole); its last step removes the file. Every copy step
//! commits the map as it goes, so after a crash the map read back holds every page the
//! reconfiguration had placed: at the next start the kept plan is diffed against that
//! map again, pages already in their slot are static (never copied twice), and only the
//! rest is copied. A file that is torn, corrupted or of another version is ignored with
//! a warning: the map stays as it was, and the next plan starts from it.

use super::{lock, Engine};
use crate::learned::write_whole;
use reblock_layout::{DiffStats, Plan, SealError, SealKind};
use std::io;
use std::path::{Path, PathBuf};

/// How the plan under way is sealed in its file.
const SEALED: SealKind = SealKind {
    magic: b"RBRECONF",
    version: 1,
    what: "reconfiguration plan",
};

/// Why a kept plan was not resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: {source}")]
    Untrusted { path: PathBuf, source: SealError },
    #[error("{path}: not a plan: {source}")]
    NotAPlan {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: {source}")]
    Refused {
        path: PathBuf,
        source: super::ReconfigureError,
    },
}

/// The file that keeps `image`'s reconfiguration under way: `IMAGE.reconfig`.
pub fn reconfig_file_of(image: &Path) -> PathBuf {
    crate::learned::beside(image, ".reconfig")
}

impl Engine {
    /// Keeps the plan of every reconfiguration in `path` from now on, and resumes the
    /// one a previous run left there unfinished: its diff against the map as it is now
    /// (pages already placed stay) is queued. `Ok(None)`: nothing to resume.
    pub fn resume_reconfiguration(&self, path: PathBuf) -> Result<Option<DiffStats>, ResumeError> {
        *lock(&self.reconfig_file) = Some(path.clone());
        let plan = match read_plan(&path) {
            Ok(Some(plan)) => plan,
            Ok(None) => return Ok(None),
            Err(e) => {
                self.forget_plan();
                return Err(e);
            }
        };
        match self.reconfigure_unless_detached(plan) {
            Ok(stats) => Ok(Some(stats)),
            Err(source) => {
                self.forget_plan();
                Err(ResumeError::Refused { path, source })
            }
        }
    }

    /// Writes `plan` to the kept-plan file, if one is set (removes it when `done`: the
    /// plan needs no step); a failure is logged (the reconfiguration runs on, it only
    /// would not resume after a crash).
    pub(super) fn keep_plan_unless_done(&self, plan: &Plan, done: bool) {
        let Some(path) = lock(&self.reconfig_file).clone() else {
            return;
        };
        if done {
            return self.forget_plan();
        }
        let json = serde_json::to_vec(plan).expect("a plan serializes");
        if let Err(e) = write_whole(&path, &SEALED.seal(&json)) {
            tracing::warn!(path = %path.display(), error = %e, "cannot keep the plan under way");
        }
    }

    /// Commits the map after each copier round (one staging buffer's worth of steps,
    /// run as the copy scheduler's batches) while a plan is kept, so that pages placed
    /// before a crash are placed after it (an incoming copy alone frees no slot and so
    /// commits nothing until the next FLUSH): a commit is three synced writes, cheap
    /// beside a round's copies, and a crash loses at most one round's copies (they are
    /// redone). After the last step, commits and then forgets the plan.
    ///
    /// A round whose last batch freed slots has just committed (engine/copier.rs): then
    /// nothing changed since, and no second commit is made (an empty one still synced
    /// both devices, a drive cache drain each, once more per round).
    pub(super) fn commit_progress(&self) -> io::Result<()> {
        if lock(&self.reconfig_file).is_none() {
            return Ok(());
        }
        let pending = self.reconfig_pending();
        let mut c = lock(&self.commit);
        let snap = self.snapshot_gated(&c);
        if !snap.is_empty() {
            self.persist(&mut c, snap)?;
        }
        drop(c);
        if !pending {
            self.forget_plan();
        }
        Ok(())
    }

    /// Removes the kept-plan file: the reconfiguration is done.
    pub(super) fn forget_plan(&self) {
        let Some(path) = lock(&self.reconfig_file).clone() else {
            return;
        };
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove the finished plan");
            }
            _ => {}
        }
    }
}

/// The plan kept in `path`; `None` when there is no file.
fn read_plan(path: &Path) -> Result<Option<Plan>, ResumeError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            let path = path.to_path_buf();
            return Err(ResumeError::Io { path, source });
        }
    };
    let json = SEALED
        .unseal(&bytes)
        .map_err(|source| ResumeError::Untrusted {
            path: path.to_path_buf(),
            source,
        })?;
    serde_json::from_slice(json)
        .map(Some)
        .map_err(|source| ResumeError::NotAPlan {
            path: path.to_path_buf(),
            source,
        })
}
