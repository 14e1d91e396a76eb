#!/bin/sh
# Runs every fuzz target (the [[bin]] list of fuzz/Cargo.toml) for SECONDS each (default 10),
# starting from the committed seeds. Needs nightly and cargo-fuzz (`cargo install cargo-fuzz`).
# Usage: fuzz/run-all.sh [SECONDS]
# FUZZ_BUILD_FLAGS (e.g. "--codegen-units 16") is passed to every build and run.
set -eu
seconds="${1:-10}"
flags="${FUZZ_BUILD_FLAGS:-}"
cd "$(dirname "$0")"
targets=$(cargo +nightly fuzz list)
[ -n "$targets" ] || { echo "no fuzz targets found" >&2; exit 1; }
# shellcheck disable=SC2086
cargo +nightly fuzz build $flags
for t in $targets; do
    mkdir -p "corpus/$t"
    seeds="seeds/$t"
    [ -d "$seeds" ] || seeds=""
    echo "== $t (${seconds}s)"
    # shellcheck disable=SC2086
    cargo +nightly fuzz run $flags "$t" "corpus/$t" $seeds -- -max_total_time="$seconds" -rss_limit_mb=2048
done
echo "all $(echo "$targets" | wc -w) targets ran ${seconds}s without a crash"
