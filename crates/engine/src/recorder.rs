//! The in-server recorder: every served read and write as a native trace line
//! (`<ts_ns> <pid> <command> <sector> <sectors> <R|W>`, see the trace crate), with the
//! NBD connection id in the pid column and the command `nbd`. The next plan is built from
//! it (DESIGN.md: "its recorder feeds the next plan").

use reblock_nbd::{Op, RequestEvent, RequestObserver};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

pub struct Recorder {
    out: Mutex<BufWriter<File>>,
}

impl Recorder {
    pub fn create(path: &Path) -> io::Result<Recorder> {
        let mut w = BufWriter::new(File::create(path)?);
        writeln!(w, "# reblock serve: NBD requests; pid = connection id")?;
        Ok(Recorder { out: Mutex::new(w) })
    }
    pub fn flush(&self) -> io::Result<()> {
        self.out.lock().unwrap_or_else(|e| e.into_inner()).flush()
    }
}

/// The native line for one event, or `None` for requests that move no data.
pub fn line(e: &RequestEvent) -> Option<String> {
    let op = match e.op {
        Op::Read => 'R',
        Op::Write => 'W',
        _ => return None,
    };
    if e.errno != 0 || e.length_bytes == 0 {
        return None;
    }
    let sector = e.offset_bytes / 512;
    let end = (e.offset_bytes + u64::from(e.length_bytes)).div_ceil(512);
    Some(format!(
        "{} {} nbd {} {} {}",
        e.ts_ns,
        e.connection_id,
        sector,
        end - sector,
        op
    ))
}

impl RequestObserver for Recorder {
    fn observe(&self, e: &RequestEvent) {
        if let Some(l) = line(e) {
            let mut w = self.out.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(w, "{l}");
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_write_covers_every_touched_sector() {
        let e = RequestEvent {
            connection_id: 3,
            op: Op::Write,
            offset_bytes: 1000,
            length_bytes: 100,
            fua: false,
            ts_ns: 77,
            duration_ns: 1,
            errno: 0,
        };
        // Bytes 1000..1100 lie in sector 1 (512..1024) and sector 2 (1024..1536).
        assert_eq!(line(&e).unwrap(), "77 3 nbd 1 2 W");
        assert_eq!(line(&RequestEvent { op: Op::Flush, ..e }), None);
        assert_eq!(line(&RequestEvent { errno: 5, ..e }), None);
    }
}
