//! reblock-engine: the online engine. It serves the data area of a backing image over
//! NBD while the layout crate's indirector (seed 001 Algorithm 5) routes every request to
//! the data area or the BOPT; it persists the map in segment summaries (seed 000 §3.3,
//! Table 2), recovers after a crash by marking every entry dirty (seed 001 §3.5.1), runs
//! reconfiguration and destage copies in the background, and flushes back on detach
//! (seed 001 §3.5.5). docs/format.md documents the on-disk format byte by byte and the
//! order of writes that makes a FLUSH durable.

pub mod background;
pub mod check;
pub mod control;
pub mod crc;
pub mod emulate;
pub mod engine;
pub mod format;
pub mod freemap;
pub mod image;
pub mod learned;
pub mod meta;
pub mod recorder;
pub mod replan;
pub mod replicas;
pub mod store;

pub use engine::{Engine, EngineOptions, OpenReport, Status};
pub use format::{Layout, LayoutRequest, Superblock};
pub use meta::MetaError;
pub use store::{Dev, Fault, FaultStore, FileStore, Logged, MemStore, Store};
