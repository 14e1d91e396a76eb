//! Fuzz target for the engine's on-disk format reader: `cargo fuzz run engine_format`.
//!
//! The body is `reblock_engine::check::fuzz_one`, which tests/format_fuzz.rs also runs on
//! random and mutated images in every `cargo test`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    reblock_engine::check::fuzz_one(data);
});
