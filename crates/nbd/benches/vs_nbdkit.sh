#!/usr/bin/env bash
# Compares reblock-nbd with nbdkit's file plugin serving the same backing file, in the
# same run, through fio's nbd engine over a Unix socket. Prints IOPS / MiB/s for each
# server and the ratio reblock / nbdkit (target: >= 0.90 everywhere).
#
#   crates/nbd/benches/vs_nbdkit.sh [runtime_s=3] [size_mib=256] [rounds=2]
#
# Each workload runs `rounds` times per server, alternating servers (reblock, nbdkit,
# reblock, ...) so that background load and page-cache state hit both alike; the best
# round of each server is reported.
#
# Needs: fio (with the nbd engine), nbdkit, jq; builds the serve_file example (release).
set -euo pipefail
runtime=${1:-3}
size_mib=${2:-256}
rounds=${3:-2}
root=$(cd "$(dirname "$0")/../../.." && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

target=${CARGO_TARGET_DIR:-$root/target}
[ -n "${SKIP_BUILD:-}" ] || (cd "$root" && cargo build -q --release -p reblock-nbd --example serve_file)
serve_file=$target/release/examples/serve_file

img=$work/disk.img
# A fully written file, so neither server reads holes.
dd if=/dev/urandom of="$img" bs=1M count="$size_mib" status=none

# workload name, fio rw, block size, iodepth
workloads=(
  "randread-4k-qd1 randread 4k 1"
  "randread-4k-qd32 randread 4k 32"
  "randwrite-4k-qd1 randwrite 4k 1"
  "randwrite-4k-qd32 randwrite 4k 32"
  "seqread-1m-qd8 read 1m 8"
  "seqwrite-1m-qd8 write 1m 8"
)

wait_for() { for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.05; done; return 1; }

# measure <socket> <rw> <bs> <iodepth> -> "iops mib_s"
measure() {
  fio --name=bench --ioengine=nbd --uri="nbd+unix:///?socket=$1" --rw="$2" --bs="$3" \
    --iodepth="$4" --time_based --runtime="$runtime" --ramp_time=1 --randrepeat=0 \
    --output-format=json 2>/dev/null |
    sed -n '/^{/,$p' | # the engine prints a banner line before the JSON
    jq -r '.jobs[0] | (.read.iops + .write.iops | tostring) + " " +
      ((.read.bw + .write.bw) / 1024 | tostring)'
}

"$serve_file" "$img" --unix "$work/reblock.sock" 2>/dev/null &
wait_for "$work/reblock.sock"
nbdkit -f -U "$work/nbdkit.sock" file "$img" &
wait_for "$work/nbdkit.sock"

printf '%-18s %14s %14s %8s\n' workload reblock nbdkit ratio
for w in "${workloads[@]}"; do
  read -r name rw bs qd <<<"$w"
  r_iops=0 r_mib=0 k_iops=0 k_mib=0
  for _ in $(seq "$rounds"); do
    read -r i m < <(measure "$work/reblock.sock" "$rw" "$bs" "$qd")
    r_iops=$(jq -n "[$r_iops, $i] | max") r_mib=$(jq -n "[$r_mib, $m] | max")
    read -r i m < <(measure "$work/nbdkit.sock" "$rw" "$bs" "$qd")
    k_iops=$(jq -n "[$k_iops, $i] | max") k_mib=$(jq -n "[$k_mib, $m] | max")
  done
  if [ "$bs" = 1m ]; then unit=MiB/s; r=$r_mib; k=$k_mib; else unit=IOPS; r=$r_iops; k=$k_iops; fi
  ratio=$(jq -n "$r / $k * 100 | round / 100")
  printf '%-18s %9.0f %-4s %9.0f %-4s %8s\n' "$name" "$r" "$unit" "$k" "$unit" "$ratio"
done
