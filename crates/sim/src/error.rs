//! Everything that can stop a replay, each naming what was wrong and where.

use std::path::PathBuf;

use reblock_trace::TraceError;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error(
        "request {number}: sectors {sector}..{end_sector} lie beyond the device's capacity \
         of {capacity_sectors} sectors (pass --wrap to fold addresses modulo the capacity)"
    )]
    BeyondCapacity {
        number: u64,
        sector: u64,
        end_sector: u64,
        capacity_sectors: u64,
    },
    #[error(
        "request {number}: {sectors} sectors is more than the whole device \
         ({capacity_sectors} sectors), even with --wrap"
    )]
    LargerThanDevice {
        number: u64,
        sectors: u32,
        capacity_sectors: u64,
    },
    #[error(
        "the trace addresses {count} devices (its device column holds {first} and {other}, \
         ...); each needs its own layout, and merging them onto one device would be wrong: \
         split the trace by its device column and run once per device (`simulate` replays \
         each device on its own model)"
    )]
    SeveralDevices {
        count: usize,
        first: u32,
        other: u32,
    },
    #[error("invalid simulation setting: {0}")]
    Config(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: writing Parquet: {source}", path.display())]
    Parquet {
        path: PathBuf,
        source: parquet::errors::ParquetError,
    },
}
