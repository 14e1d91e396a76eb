//! Frequent block pairs of a whole trace, streamed (`reblock pairs`, and the Python
//! package's `pairs`): the sessionization of [`crate::session`] and the pair counting of
//! [`crate::mining`] over every request, in memory proportional to the distinct pairs.
//! The Spark job of the Python package computes the same pairs on a cluster; both print
//! `{"pairs": [{"a", "b", "support"}, ...]}` sorted by `a`, then `b`.

use std::path::{Path, PathBuf};

use reblock_trace::{Op, TraceError, TraceReader};
use serde::{Deserialize, Serialize};

use crate::mining::PairCounts;
use crate::session::{SessionConfig, Sessionizer};

/// The pair window when none is given: 13, the disks less one of the default 14-disk
/// array of the evaluation (see [`crate::mining`] for why disks - 1 loses nothing).
pub const DEFAULT_PAIR_WINDOW: usize = 13;

/// What to mine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairMining {
    pub sessions: SessionConfig,
    /// Each block is paired with the next `window` blocks of its session.
    pub window: usize,
    /// Keep pairs seen in at least this many sessions (at least 1).
    pub support: u32,
}

/// One frequent pair: blocks `a < b` shared by `support` sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MinedPair {
    pub a: u64,
    pub b: u64,
    pub support: u32,
}

/// The pairs of a trace, and counts for a human summary (not in the JSON, which the Spark
/// job prints identically).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MinedPairs {
    pub pairs: Vec<MinedPair>,
    #[serde(skip)]
    pub requests: u64,
    #[serde(skip)]
    pub sessions: u64,
    #[serde(skip)]
    pub distinct_pairs: usize,
}

/// Mines every request `reader` yields; `progress` hears the request count now and then.
pub fn mine_pairs(
    reader: &mut TraceReader,
    cfg: &PairMining,
    mut progress: impl FnMut(u64),
) -> Result<MinedPairs, TraceError> {
    let mut counts = PairCounts::new(cfg.window);
    let mut sessions = Sessionizer::new(cfg.sessions);
    let mut requests = 0u64;
    while let Some(r) = reader.next_request()? {
        sessions.push(r.ts_ns, r.op == Op::Write, r.sector, r.sectors, |s| {
            counts.add_session(s)
        });
        requests += 1;
        if requests.is_multiple_of(1 << 16) {
            progress(requests);
        }
    }
    sessions.flush(|s| counts.add_session(s));
    let pairs = counts
        .frequent(cfg.support.max(1))
        .into_iter()
        .map(|p| MinedPair {
            a: p.a,
            b: p.b,
            support: p.count,
        })
        .collect();
    Ok(MinedPairs {
        pairs,
        requests,
        sessions: counts.sessions(),
        distinct_pairs: counts.distinct_pairs(),
    })
}

/// Pairs mined elsewhere (the Spark job, or `reblock pairs` on a trace's training part),
/// read from the JSON both print, for `reblock evaluate --array --pairs FILE`.
#[derive(Clone, Debug, PartialEq)]
pub struct PairsFile {
    /// Where the pairs came from, for messages and the evaluation's output.
    pub path: PathBuf,
    /// The pairs, sorted by `a`, then `b`; each `a < b`, none repeated.
    pub pairs: Vec<MinedPair>,
}

/// Why a pairs file cannot be used; every variant names the file, and the pair and field
/// when one is at fault.
#[derive(Debug, thiserror::Error)]
pub enum PairsFileError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{}: not a pairs file (`{{\"pairs\": [{{\"a\": BLOCK, \"b\": BLOCK, \"support\": \
         N}}, ...]}}`, as `reblock pairs --json` and the Spark job print): {}{source}",
        path.display(),
        at.as_deref().map(|at| format!("{at}: ")).unwrap_or_default()
    )]
    Format {
        path: PathBuf,
        /// Where in the document the bad value is (`pairs[3].support`), when in a part.
        at: Option<String>,
        source: serde_json::Error,
    },
    #[error(
        "{}: pairs[{index}]: field `b` ({b}) must be greater than field `a` ({a})",
        path.display()
    )]
    Unordered {
        path: PathBuf,
        index: usize,
        a: u64,
        b: u64,
    },
    #[error("{}: pairs[{index}]: field `support` is 0 (at least 1)", path.display())]
    ZeroSupport { path: PathBuf, index: usize },
    #[error("{}: pairs[{index}]: the pair ({a}, {b}) is listed twice", path.display())]
    Repeated {
        path: PathBuf,
        index: usize,
        a: u64,
        b: u64,
    },
    #[error(
        "{}: pairs[{index}]: block {block} (field `{field}`) is not a block of the trace \
         at {block_bytes}-byte blocks: were the pairs mined from this trace, with the same \
         --block-size?",
        path.display()
    )]
    NotInTrace {
        path: PathBuf,
        index: usize,
        field: &'static str,
        block: u64,
        block_bytes: u64,
    },
}

impl PairsFile {
    /// Reads and checks a pairs file: JSON of the right shape, `a < b`, supports of at
    /// least 1, no pair twice. The pairs come back sorted.
    pub fn read(path: &Path) -> Result<PairsFile, PairsFileError> {
        let file = std::fs::File::open(path).map_err(|source| PairsFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(std::io::BufReader::new(file), path)
    }

    /// Reads and checks pairs in the file's JSON from `json`; `path` names them in
    /// messages and in the evaluation's output.
    pub fn parse(json: impl std::io::Read, path: &Path) -> Result<PairsFile, PairsFileError> {
        // The JSON path of a bad value (`pairs[3].support`) goes in front of serde's
        // message, which gives the line and column.
        let format = |at: Option<String>, source| PairsFileError::Format {
            path: path.to_path_buf(),
            at,
            source,
        };
        let mut de = serde_json::Deserializer::from_reader(json);
        let doc: MinedPairs = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let at = e.path().to_string();
            format((at != ".").then_some(at), e.into_inner())
        })?;
        de.end().map_err(|e| format(None, e))?;
        Self::checked(path, doc.pairs)
    }

    fn checked(path: &Path, pairs: Vec<MinedPair>) -> Result<PairsFile, PairsFileError> {
        let path = path.to_path_buf();
        let mut out = Vec::with_capacity(pairs.len());
        for (index, p) in pairs.into_iter().enumerate() {
            if p.a >= p.b {
                let (a, b) = (p.a, p.b);
                return Err(PairsFileError::Unordered { path, index, a, b });
            }
            if p.support == 0 {
                return Err(PairsFileError::ZeroSupport { path, index });
            }
            out.push((p, index));
        }
        out.sort_unstable();
        if let Some(w) = out
            .windows(2)
            .find(|w| (w[0].0.a, w[0].0.b) == (w[1].0.a, w[1].0.b))
        {
            let (index, a, b) = (w[0].1.max(w[1].1), w[0].0.a, w[0].0.b);
            return Err(PairsFileError::Repeated { path, index, a, b });
        }
        let pairs = out.into_iter().map(|(p, _)| p).collect();
        Ok(PairsFile { path, pairs })
    }

    /// The least support in the file (none when it lists no pair).
    pub fn least_support(&self) -> Option<u32> {
        self.pairs.iter().map(|p| p.support).min()
    }

    /// A note when an evaluation asks for a support below every support in the file:
    /// if the file was mined with a higher one, the runs below it lack pairs they would
    /// use. A file cannot say how it was mined, so this is a note, not a refusal.
    pub fn support_note(&self, supports: &[u32]) -> Option<String> {
        let (least, asked) = (self.least_support()?, *supports.iter().min()?);
        (asked < least).then(|| {
            format!(
                "--support {asked}, but every pair of {} has a support of {least} or more: \
                 if it was mined with --support above {asked}, the runs at {asked} lack the \
                 pairs below it",
                self.path.display()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<PairsFile, PairsFileError> {
        PairsFile::parse(text.as_bytes(), Path::new("p.json"))
    }

    #[test]
    fn a_bad_value_is_named_by_its_place_in_the_file() {
        let cases = [
            (
                r#"{"pairs": [{"a": 1, "b": 2, "support": 1}, {"a": 3}]}"#,
                "print): pairs[1]: ",
            ),
            (
                r#"{"pairs": [{"a": -1, "b": 2, "support": 1}]}"#,
                "print): pairs[0].a: ",
            ),
            (
                r#"{"pairs": [{"a": 1, "b": 2, "support": 1e3}]}"#,
                "pairs[0].support: ",
            ),
            (r#"{"pairs": {}}"#, "print): pairs: invalid type"),
            (r#"{"pairs": []} trailing"#, "p.json: not a pairs file"),
            (r#"{"runs": []}"#, "p.json: not a pairs file"),
        ];
        for (text, wanted) in cases {
            let e = parsed(text).unwrap_err().to_string();
            assert!(
                e.starts_with("p.json: ") && e.contains(wanted),
                "{text}: {e}"
            );
            assert!(e.contains("line 1 column"), "{text}: {e}");
        }
    }

    #[test]
    fn pairs_come_back_sorted_with_other_keys_ignored() {
        let text = r#"{"pairs": [{"a": 5, "b": 9, "support": 2}, {"a": 1, "b": 2, "support": 7}],
                       "requests": 10}"#;
        let file = parsed(text).unwrap();
        let got: Vec<_> = file.pairs.iter().map(|p| (p.a, p.b, p.support)).collect();
        assert_eq!(got, [(1, 2, 7), (5, 9, 2)]);
        assert_eq!(file.least_support(), Some(2));
        assert_eq!(file.support_note(&[2, 5]), None);
        let note = file.support_note(&[5, 1]).unwrap();
        assert!(
            note.starts_with("--support 1, but every pair of p.json"),
            "{note}"
        );
    }
}
