//! The NBD server's protocol parsing: arbitrary bytes as a whole client session
//! (handshake, then transmission against a RAM export), plus the pure request checks.
//! Properties: no panic, no hang, and every request `check_request` accepts lies inside
//! the export and the payload limit.
#![no_main]

use std::io::{self, Cursor};
use std::sync::Arc;
use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use reblock_nbd::handshake::{self, HandshakeEnd};
use reblock_nbd::proto::{self, Command, Negotiated};
use reblock_nbd::transmission::{self, Context};
use reblock_nbd::{ExportSet, MemoryExport};

const EXPORT_BYTES: usize = 64 * 1024;
const MAX_PAYLOAD_BYTES: u32 = 16 * 1024;

fn session(data: &[u8]) {
    let export = Arc::new(MemoryExport::new(EXPORT_BYTES, data.first() == Some(&1)));
    let exports = ExportSet::single("disk", export).expect("valid name");
    let mut input = Cursor::new(data);
    let mut output = Vec::new();
    let Ok(HandshakeEnd::Transmission(s)) =
        handshake::negotiate(&mut input, &mut output, &exports, MAX_PAYLOAD_BYTES)
    else {
        return;
    };
    let ctx = Context {
        connection_id: 1,
        export: s.export.as_ref(),
        negotiated: s.negotiated,
        observer: None,
        epoch: Instant::now(),
        workers: 1,
        worker_budget: &std::sync::atomic::AtomicUsize::new(0),
    };
    transmission::serve(input, io::sink(), &ctx);
}

fn requests(data: &[u8]) {
    for flags in [0u16, proto::TX_READ_ONLY | proto::TX_HAS_FLAGS, 0x01ff] {
        let n = Negotiated {
            size_bytes: EXPORT_BYTES as u64,
            tx_flags: flags,
            structured: flags & 1 != 0,
            max_payload_bytes: MAX_PAYLOAD_BYTES,
            block_status: flags & 1 != 0,
        };
        for chunk in data.chunks_exact(proto::REQUEST_HEADER_BYTES) {
            let Ok(h) = proto::parse_request_header(chunk.try_into().expect("28 bytes")) else {
                continue;
            };
            match proto::check_request(&h, &n) {
                Ok(Command::Read { offset, length }) | Ok(Command::Write { offset, length, .. }) => {
                    assert!(length <= MAX_PAYLOAD_BYTES && length > 0);
                    assert!(offset + u64::from(length) <= EXPORT_BYTES as u64);
                }
                Ok(Command::Trim { offset, length, .. } | Command::WriteZeroes { offset, length, .. }) => {
                    assert!(!n.read_only());
                    assert!(offset + u64::from(length) <= EXPORT_BYTES as u64);
                }
                Ok(_) => {}
                Err(r) => assert!(r.discard_bytes == 0 || h.kind == proto::CMD_WRITE),
            }
        }
    }
    let _ = proto::parse_info_request(data);
    let _ = proto::parse_meta_context_request(data);
}

fuzz_target!(|data: &[u8]| {
    session(data);
    requests(data);
});
