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
        "{}: not a pairs file (`{{\"pairs\": [{{\"a\": BLOCK, \"b\": BLOCK, \"support\": N}}, \
         ...]}}`, as `reblock pairs --json` and the Spark job print): {source}",
        path.display()
    )]
    Format {
        path: PathBuf,
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

/// The top level of a pairs file; other keys are allowed (for counts a tool may add).
#[derive(Deserialize)]
struct PairsDoc {
    #[serde(deserialize_with = "numbered_pairs")]
    pairs: Vec<FilePair>,
}

/// One pair as written, each field's errors naming the field.
#[derive(Deserialize)]
struct FilePair {
    #[serde(deserialize_with = "field_a")]
    a: u64,
    #[serde(deserialize_with = "field_b")]
    b: u64,
    #[serde(deserialize_with = "field_support")]
    support: u32,
}

/// A field's value, its error prefixed with the field's name.
fn named_field<'de, D, T>(d: D, name: &str) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    use serde::de::Error;
    T::deserialize(d).map_err(|e| D::Error::custom(format_args!("field `{name}`: {e}")))
}

fn field_a<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    named_field(d, "a")
}
fn field_b<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    named_field(d, "b")
}
fn field_support<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    named_field(d, "support")
}

/// The `pairs` list, an element's error prefixed with its index.
fn numbered_pairs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<FilePair>, D::Error> {
    struct Numbered;
    impl<'de> serde::de::Visitor<'de> for Numbered {
        type Value = Vec<FilePair>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of pairs")
        }
        fn visit_seq<S: serde::de::SeqAccess<'de>>(
            self,
            mut seq: S,
        ) -> Result<Self::Value, S::Error> {
            use serde::de::Error;
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            loop {
                let index = out.len();
                match seq.next_element::<FilePair>() {
                    Ok(Some(p)) => out.push(p),
                    Ok(None) => return Ok(out),
                    Err(e) => return Err(S::Error::custom(format_args!("pairs[{index}]: {e}"))),
                }
            }
        }
    }
    d.deserialize_seq(Numbered)
}

impl PairsFile {
    /// Reads and checks a pairs file: JSON of the right shape, `a < b`, supports of at
    /// least 1, no pair twice. The pairs come back sorted.
    pub fn read(path: &Path) -> Result<PairsFile, PairsFileError> {
        let file = std::fs::File::open(path).map_err(|source| PairsFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let doc: PairsDoc =
            serde_json::from_reader(std::io::BufReader::new(file)).map_err(|source| {
                PairsFileError::Format {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
        Self::checked(path, doc.pairs)
    }

    fn checked(path: &Path, pairs: Vec<FilePair>) -> Result<PairsFile, PairsFileError> {
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
            out.push((
                MinedPair {
                    a: p.a,
                    b: p.b,
                    support: p.support,
                },
                index,
            ));
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
}
