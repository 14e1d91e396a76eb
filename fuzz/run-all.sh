#!/bin/sh
# Runs every fuzz target (the [[bin]] list of fuzz/Cargo.toml) for SECONDS each (default 10),
# starting from the committed seeds. Needs nightly and cargo-fuzz (`cargo install cargo-fuzz`).
# Usage: fuzz/run-all.sh [SECONDS]
set -eu
seconds="${1:-10}"
cd "$(dirname "$0")"
targets=$(cargo +nightly fuzz list)
[ -n "$targets" ] || { echo "no fuzz targets found" >&2; exit 1; }
cargo +nightly fuzz build
for t in $targets; do
    mkdir -p "corpus/$t"
    seeds="seeds/$t"
    [ -d "$seeds" ] || seeds=""
    echo "== $t (${seconds}s)"
    # shellcheck disable=SC2086
    cargo +nightly fuzz run "$t" "corpus/$t" $seeds -- -max_total_time="$seconds" -rss_limit_mb=2048
done
echo "all $(echo "$targets" | wc -w) targets ran ${seconds}s without a crash"
