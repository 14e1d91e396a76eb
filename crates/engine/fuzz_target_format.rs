//! Fuzz target for the on-disk format reader (cargo-fuzz layout). To enable it, add to
//! fuzz/Cargo.toml:
//!
//! ```toml
//! reblock-engine = { path = "../crates/engine" }
//!
//! [[bin]]
//! name = "engine_format"
//! path = "../crates/engine/fuzz_target_format.rs"
//! test = false
//! doc = false
//! bench = false
//! ```
//!
//! The body is `reblock_engine::check::fuzz_one`, which tests/format_fuzz.rs also runs on
//! random and mutated images in every `cargo test`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    reblock_engine::check::fuzz_one(data);
});
