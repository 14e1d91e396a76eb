//! The Parquet backend on arbitrary bytes (the seeds are real reblock Parquet files).
#![no_main]

use libfuzzer_sys::fuzz_target;
use reblock_trace::FormatChoice;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| common::read(FormatChoice::Named("parquet".into()), data));
