//! Trace replay on modelled devices (DESIGN.md `reblock-sim`): open-loop replay at the
//! trace's pace sped up (seed 000 §6.1) or a closed loop of N outstanding requests,
//! per-device schedulers (FCFS, SSTF, C-LOOK) with request merging, array requests split
//! into phases of member I/Os, a [`Mapper`] hook for the layout's indirector, and the
//! metrics of DESIGN.md "Metrics" (disk busy time first).

pub mod error;
pub mod mapper;
pub mod metrics;
pub mod output;
pub mod per_request;
pub mod purpose;
pub mod replay;
pub mod scheduler;
pub mod source;
pub mod streams;

pub use error::SimError;
pub use mapper::{Identity, Mapper};
pub use metrics::{
    DeviceReport, Phase, PhaseReport, PurposeReport, Report, Summary, TraceDeviceReport, Window,
    WindowReport,
};
pub use output::{device_factory, SimulationOutput};
pub use per_request::PerRequestWriter;
pub use purpose::Purpose;
pub use replay::{Completion, Config, DeviceFactory, Observer, Pacing, Replay};
pub use scheduler::SchedulerKind;
pub use source::{require_single_device, Interleave, IterSource, Source, Submission, TraceSource};
pub use streams::{replay_streams, StreamsConfig, StreamsReport};
