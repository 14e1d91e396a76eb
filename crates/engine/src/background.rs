//! The background worker: destage when the write buffer runs low, and reconfiguration
//! steps rate-limited and only after foreground I/O has been idle a moment (yielding to
//! it, seed 001 §3.5.2).

use crate::engine::Engine;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub struct BackgroundOptions {
    /// Reconfiguration copy budget (bytes per second).
    pub rate_bytes_per_s: u64,
    /// Foreground idle time required before a reconfiguration step.
    pub idle_ms: u64,
}

impl Default for BackgroundOptions {
    fn default() -> Self {
        BackgroundOptions {
            rate_bytes_per_s: 64 << 20,
            idle_ms: 2,
        }
    }
}

/// Sleeps `d` (a round's bytes over the rate: a copier round can be megabytes) in
/// slices, so that a stop is not kept waiting.
fn pause(d: Duration, stop: &AtomicBool) {
    let slice = Duration::from_millis(100);
    let mut left = d;
    while !left.is_zero() && !stop.load(Ordering::Relaxed) {
        let now = left.min(slice);
        std::thread::sleep(now);
        left -= now;
    }
}

pub struct Background {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    pub fn start(engine: Arc<Engine>, o: BackgroundOptions) -> Background {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("background".into())
            .spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    let idle = engine.idle_ns() >= o.idle_ms * 1_000_000;
                    let before = engine.bytes_moved();
                    match engine.background_tick(idle) {
                        Ok(0) => std::thread::sleep(Duration::from_millis(
                            if engine.reconfig_pending() { 1 } else { 20 },
                        )),
                        Ok(_) => {
                            let moved = engine.bytes_moved() - before;
                            let secs = moved as f64 / o.rate_bytes_per_s.max(1) as f64;
                            pause(Duration::from_secs_f64(secs), &stop2);
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "background step failed");
                            std::thread::sleep(Duration::from_millis(200));
                        }
                    }
                }
            })
            .expect("spawn background thread");
        Background {
            stop,
            thread: Some(thread),
        }
    }

    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
