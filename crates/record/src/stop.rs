//! When to stop recording: a deadline, or SIGINT/SIGTERM.
//!
//! The signals set a flag (the recorder notices it within one poll interval and then
//! restores the tracing state) instead of killing the process. A second signal of the same
//! kind while the flag is set terminates at once, as users expect of a second Ctrl-C.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::SigId;

use crate::error::RecordError;

/// Why recording ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StopReason {
    Duration,
    Signal,
}

/// The stop condition of one recording; unregisters its signal handlers when dropped.
pub struct Stop {
    flag: Arc<AtomicBool>,
    duration: Option<Duration>,
    /// Set by [`Stop::begin`]: the duration counts from when recording has begun.
    deadline: Cell<Option<Instant>>,
    ids: Vec<SigId>,
}

impl Stop {
    /// Stops after `duration` (if any), or on SIGINT/SIGTERM when `signals` is true.
    pub fn new(duration: Option<Duration>, signals: bool) -> Result<Stop, RecordError> {
        let flag = Arc::new(AtomicBool::new(false));
        let mut ids = Vec::new();
        if signals {
            for sig in [SIGINT, SIGTERM] {
                let register = |id: std::io::Result<SigId>| {
                    id.map_err(|e| RecordError::io("install the SIGINT/SIGTERM handlers", e))
                };
                ids.push(register(signal_hook::flag::register_conditional_shutdown(
                    sig,
                    1,
                    flag.clone(),
                ))?);
                ids.push(register(signal_hook::flag::register(sig, flag.clone()))?);
            }
        }
        Ok(Stop {
            flag,
            duration,
            deadline: Cell::new(None),
            ids,
        })
    }

    /// Starts the clock of the duration (setting up tracing does not count).
    pub fn begin(&self) {
        self.deadline.set(self.duration.map(|d| Instant::now() + d));
    }

    /// Why to stop now, if it is time.
    pub fn reason(&self) -> Option<StopReason> {
        if self.flag.load(Ordering::Relaxed) {
            return Some(StopReason::Signal);
        }
        match self.deadline.get() {
            Some(d) if Instant::now() >= d => Some(StopReason::Duration),
            _ => None,
        }
    }

    /// How long to wait for input at most before checking again.
    pub fn wait(&self, tick: Duration) -> Duration {
        match self.deadline.get() {
            Some(d) => tick.min(d.saturating_duration_since(Instant::now())),
            None => tick,
        }
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}
