//! Helpers shared by the `serve` tests.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// Waits until `p` exists (a socket the server creates once it listens); panics when the
/// server exits first or after 30 s.
pub fn wait_for(p: &Path, child: &mut Child) {
    let t = Instant::now();
    while !p.exists() {
        assert!(child.try_wait().unwrap().is_none(), "serve exited early");
        assert!(t.elapsed() < Duration::from_secs(30), "no {}", p.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}
