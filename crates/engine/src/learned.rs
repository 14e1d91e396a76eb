//! What `serve` has learnt, kept across restarts: the re-planner's learning state
//! (reblock-plan's `LearningState`: decayed access graphs) in a file beside the image,
//! `IMAGE.learned`, written whole at each re-plan and at a clean stop, and read back at
//! start. The file is written to a temporary name, synced and renamed over the old one,
//! so a crash leaves the old state or the new one; a file that is nevertheless torn,
//! corrupted or of another format version fails its checksum or version check and is
//! ignored with a warning (the engine then learns afresh), never trusted.

use reblock_plan::{LearningError, LearningState, MasterGraph};
use reblock_trace::Request;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Why the learning-state file was not read or written.
#[derive(Debug, thiserror::Error)]
pub enum LearnedFileError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: {source}")]
    Untrusted {
        path: PathBuf,
        source: LearningError,
    },
}

/// The file a learning state is kept in.
#[derive(Clone, Debug)]
pub struct LearnedFile {
    path: PathBuf,
}

/// `image` with `suffix` appended to its file name (`disk.img` -> `disk.img.learned`).
pub fn beside(image: &Path, suffix: &str) -> PathBuf {
    let mut name = image.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    image.with_file_name(name)
}

/// Writes `bytes` to `path` whole: into a temporary file beside it, synced, renamed
/// over `path`, and the directory synced, so a crash leaves the old file or the new one.
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = beside(path, ".tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    std::fs::File::open(dir.unwrap_or(Path::new(".")))?.sync_all()
}

impl LearnedFile {
    /// The learning-state file of `image`: `IMAGE.learned`.
    pub fn of_image(image: &Path) -> LearnedFile {
        LearnedFile {
            path: beside(image, ".learned"),
        }
    }
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The state kept in the file; `None` when there is no file.
    pub fn load(&self) -> Result<Option<LearningState>, LearnedFileError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                let path = self.path.clone();
                return Err(LearnedFileError::Io { path, source });
            }
        };
        LearningState::from_bytes(&bytes)
            .map(Some)
            .map_err(|source| LearnedFileError::Untrusted {
                path: self.path.clone(),
                source,
            })
    }

    pub fn save(&self, state: &LearningState) -> Result<(), LearnedFileError> {
        write_whole(&self.path, &state.to_bytes()).map_err(|source| LearnedFileError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

/// The re-planner's learning: the state, the file it is kept in, and what `status` says
/// of it.
pub struct Learner {
    state: LearningState,
    file: Option<LearnedFile>,
    page_sectors: u64,
    /// Where the state came from: read back from the file, or learnt afresh (and why).
    pub origin: String,
    /// Distinct pages the state covers (after the last checkpoint).
    pub learned_pages: u64,
}

impl Learner {
    /// The state kept in `file` when it can be trusted (its decay set to `decay`), else
    /// an empty one; a file that cannot be trusted is reported and left to be replaced.
    pub fn open(
        decay: f64,
        file: Option<LearnedFile>,
        page_sectors: u64,
    ) -> Result<Learner, LearningError> {
        let fresh = LearningState::new(decay, LearningState::DEFAULT_MAX_VERTICES)?;
        let (state, origin) = match file.as_ref().map(|f| (f, f.load())) {
            None => (fresh, "fresh (not kept: no image file)".to_string()),
            Some((f, Ok(None))) => (fresh, format!("fresh ({} not found)", f.path.display())),
            Some((f, Ok(Some(mut s)))) => {
                s.set_decay(decay)?;
                let from = format!(
                    "{} ({} epochs, {} requests)",
                    f.path.display(),
                    s.epochs(),
                    s.requests()
                );
                (s, from)
            }
            Some((_, Err(e))) => {
                tracing::warn!(error = %e, "ignoring the learning-state file; learning afresh");
                (fresh, format!("fresh (ignored {e})"))
            }
        };
        let learned_pages = LearningState::pages_of(&state.graph(), page_sectors);
        Ok(Learner {
            state,
            file,
            page_sectors,
            origin,
            learned_pages,
        })
    }

    pub fn state(&self) -> &LearningState {
        &self.state
    }

    /// The master graph of the state plus `new` requests (not learnt yet).
    pub fn graph_with(&self, new: &[Request]) -> MasterGraph {
        self.state.graph_with(new)
    }

    /// A checkpoint: `new` (the requests since the last one) is learnt, the epoch ends
    /// (the counts decay) and the state is written to its file. A failed write is logged
    /// and the state kept in memory: learning goes on.
    pub fn checkpoint(&mut self, new: &[Request]) {
        self.state.learn(new);
        self.state.next_epoch();
        self.learned_pages = LearningState::pages_of(&self.state.graph(), self.page_sectors);
        if let Some(f) = &self.file {
            if let Err(e) = f.save(&self.state) {
                tracing::warn!(error = %e, "could not keep the learning state");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_trace::Op;

    fn reads(n: u64) -> Vec<Request> {
        (0..n)
            .map(|i| Request {
                ts_ns: i,
                pid: Some(1),
                command: 0,
                device: 0,
                sector: (i % 5) * 800,
                sectors: 8,
                op: Op::Read,
            })
            .collect()
    }

    #[test]
    fn a_checkpoint_is_read_back_and_a_damaged_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("disk.img");
        let file = LearnedFile::of_image(&image);
        assert_eq!(file.path(), dir.path().join("disk.img.learned"));
        let mut l = Learner::open(0.5, Some(file.clone()), 8).unwrap();
        assert!(l.origin.starts_with("fresh"), "{}", l.origin);
        l.checkpoint(&reads(50));
        assert_eq!(l.learned_pages, 5);
        let back = Learner::open(0.9, Some(file.clone()), 8).unwrap();
        assert_eq!(back.learned_pages, 5);
        assert_eq!(back.state().decay(), 0.9, "the setting given wins");
        assert!(
            back.origin
                .contains("disk.img.learned (1 epochs, 25 requests)"),
            "{}",
            back.origin
        );
        let mut bytes = std::fs::read(file.path()).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(file.path(), &bytes).unwrap();
        let damaged = Learner::open(0.5, Some(file.clone()), 8).unwrap();
        assert!(damaged.state().is_empty());
        assert!(damaged.origin.contains("checksum"), "{}", damaged.origin);
        std::fs::write(file.path(), &bytes[..10]).unwrap();
        let torn = Learner::open(0.5, Some(file), 8).unwrap();
        assert!(torn.origin.contains("torn"), "{}", torn.origin);
    }
}
