//! The small engine layout the in-memory tests share: 256 data pages, 8 segments of 8
//! pages, a quarter of them write buffer.
#![allow(dead_code)]

use reblock_engine::format::LayoutRequest;
use reblock_engine::Layout;

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
