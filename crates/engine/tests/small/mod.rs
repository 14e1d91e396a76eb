//! The small engine layout the in-memory tests share: 256 data pages, 8 segments of 8
//! pages, a quarter of them write buffer.
#![allow(dead_code)]

use reblock_engine::format::LayoutRequest;
use reblock_engine::Layout;
use reblock_engine::{Dev, MemStore, Store};
use std::io;
use std::time::Duration;

pub fn layout() -> Layout {
    Layout::plan(&LayoutRequest {
        data_bytes: 256 * 4096,
        bopt_bytes: 8 * (2 * 4096 + 8 * 4096)
            + 3 * 4096
            + 34 * reblock_engine::format::FREEMAP_CHUNK_BYTES, // free-space area: 1 map chunk + 16 replica blocks, 2 copies
        page_bytes: 4096,
        segment_pages: 8,
        write_buffer_fraction: 0.25,
        separate: false,
    })
    .unwrap()
}

/// One 4 KiB page of `fill`.
pub fn page(fill: u8) -> Vec<u8> {
    vec![fill; 4096]
}

/// A memory store whose page I/O takes a while, so that a request routed before a
/// destage step is still in flight when the step applies (the races to be ruled out).
pub struct SlowStore(pub MemStore);

impl SlowStore {
    fn pause(len: usize) {
        if len <= 4096 {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

impl Store for SlowStore {
    fn read_at(&self, dev: Dev, buf: &mut [u8], offset: u64) -> io::Result<()> {
        Self::pause(buf.len());
        self.0.read_at(dev, buf, offset)
    }
    fn write_at(&self, dev: Dev, buf: &[u8], offset: u64) -> io::Result<()> {
        Self::pause(buf.len());
        self.0.write_at(dev, buf, offset)
    }
    fn sync(&self, dev: Dev) -> io::Result<()> {
        self.0.sync(dev)
    }
    fn len(&self, dev: Dev) -> io::Result<u64> {
        self.0.len(dev)
    }
    fn shared(&self) -> bool {
        self.0.shared()
    }
}
