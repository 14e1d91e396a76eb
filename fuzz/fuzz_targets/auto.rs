//! Format sniffing (`--format auto`) and whichever reader it picks, on arbitrary bytes,
//! including gzip/zstd/Parquet magic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reblock_trace::FormatChoice;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| common::read(FormatChoice::Auto, data));
