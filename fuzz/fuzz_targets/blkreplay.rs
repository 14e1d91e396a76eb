//! The blkreplay reader: arbitrary bytes, line by line and through TraceReader.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| common::lines("blkreplay", data));
