#!/usr/bin/env bash
# Compares `reblock serve` (release build) with nbdkit's file plugin serving the same
# backing file, in the same run, through fio's nbd engine over Unix sockets, in two
# states: an empty BOPT, then a BOPT whose read cache holds the whole benchmark region
# (populated with `reblock reconfigure --plan`). A second reblock server with
# --no-data-checksums serves a copy of the file, so the cost of the data-page
# checksums is measured in the same run. Prints IOPS / MiB/s per server, the ratios
# reblock / nbdkit (bar: >= 0.90) and reblock / reblock without checksums, and the
# map's heap bytes per mapped page (bar: <= 8).
#
#   crates/engine/benches/vs_nbdkit.sh [runtime_s=3] [size_mib=256] [rounds=2]
#
# Each workload runs `rounds` times per server, alternating servers, best round kept.
# NOCRC=0 leaves out the server without checksums.
# fio is limited to the first `region` bytes (what the read cache holds) for both.
# Needs: fio (nbd engine), nbdkit, jq.
set -euo pipefail
runtime=${1:-3}
size_mib=${2:-256}
rounds=${3:-2}
root=$(cd "$(dirname "$0")/../../.." && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
target=${CARGO_TARGET_DIR:-$root/target}
[ -n "${SKIP_BUILD:-}" ] || (cd "$root" && cargo build -q --release -p reblock --bin reblock)
reblock=$target/release/reblock

img=$work/disk.img
dd if=/dev/urandom of="$img" bs=1M count="$size_mib" status=none
sock=$work/reblock.sock
nocrc=${NOCRC:-1}
[ "$nocrc" = 0 ] || cp "$img" "$work/nocrc.img"

workloads=(
  "randread-4k-qd1 randread 4k 1"
  "randread-4k-qd32 randread 4k 32"
  "randwrite-4k-qd1 randwrite 4k 1"
  "randwrite-4k-qd32 randwrite 4k 32"
  "seqread-1m-qd8 read 1m 8"
  "seqwrite-1m-qd8 write 1m 8"
)
wait_for() { for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.05; done; return 1; }

# measure <socket> <rw> <bs> <iodepth> -> "iops mib_s"
measure() {
  fio --name=bench --ioengine=nbd --uri="nbd+unix:///?socket=$1" --rw="$2" --bs="$3" \
    --iodepth="$4" --size="$region" --time_based --runtime="$runtime" --ramp_time=1 \
    --randrepeat=0 --output-format=json 2>/dev/null | sed -n '/^{/,$p' |
    jq -r '.jobs[0] | (.read.iops + .write.iops | tostring) + " " +
      ((.read.bw + .write.bw) / 1024 | tostring)'
}

# The BOPT is a quarter of the file; the data area keeps the rest (--format: the image
# exists and holds data).
# Learning is off (--replan-policy vanilla): this measures the I/O path. With it on,
# the re-planner admits a plan during the random writes and its copies compete with
# them (populated randwrite QD32 fell to 0.1x nbdkit's in one run while a borg plan's
# 9,548 steps ran); that is the cost of reorganizing, not of serving.
serve() { # <image> <socket> [flags]
  local image=$1 s=$2
  shift 2
  "$reblock" serve "$image" --format --bopt-size "$((size_mib / 4))M" --write-buffer 0.2 \
    --replan-policy vanilla --unix "$s" "$@" 2>>"$work/serve.log" &
  wait_for "$s.ctl"
  wait_for "$s"
}
serve "$img" "$sock"
socks=("$sock")
if [ "$nocrc" != 0 ]; then
  serve "$work/nocrc.img" "$work/nocrc.sock" --no-data-checksums
  socks+=("$work/nocrc.sock")
fi
status() { "$reblock" status --unix "${1:-$sock}" --json; }
rc_pages=$(status | jq .read_cache_pages)
region=$((rc_pages * 4096))
nbdkit -f -U "$work/nbdkit.sock" file "$img" &
wait_for "$work/nbdkit.sock"

run_all() {
  printf '%-18s %14s %14s %14s %8s %8s   (%s)\n' workload reblock no-checksums nbdkit \
    ratio crc-cost "$1"
  for w in "${workloads[@]}"; do
    read -r name rw bs qd <<<"$w"
    r_iops=0 r_mib=0 n_iops=0 n_mib=0 k_iops=0 k_mib=0
    for _ in $(seq "$rounds"); do
      read -r i m < <(measure "$sock" "$rw" "$bs" "$qd")
      r_iops=$(jq -n "[$r_iops, $i] | max") r_mib=$(jq -n "[$r_mib, $m] | max")
      if [ "$nocrc" != 0 ]; then
        read -r i m < <(measure "$work/nocrc.sock" "$rw" "$bs" "$qd")
        n_iops=$(jq -n "[$n_iops, $i] | max") n_mib=$(jq -n "[$n_mib, $m] | max")
      fi
      read -r i m < <(measure "$work/nbdkit.sock" "$rw" "$bs" "$qd")
      k_iops=$(jq -n "[$k_iops, $i] | max") k_mib=$(jq -n "[$k_mib, $m] | max")
    done
    if [ "$bs" = 1m ]; then
      unit=MiB/s r=$r_mib n=$n_mib k=$k_mib
    else
      unit=IOPS r=$r_iops n=$n_iops k=$k_iops
    fi
    ratio=$(jq -n "$r / $k * 100 | round / 100")
    # reblock with checksums / without: below 1 is what the checksums cost.
    cost=-
    [ "$nocrc" = 0 ] || cost=$(jq -n "$r / $n * 100 | round / 100")
    printf '%-18s %9.0f %-4s %9.0f %-4s %9.0f %-4s %8s %8s\n' "$name" "$r" "$unit" "$n" \
      "$unit" "$k" "$unit" "$ratio" "$cost"
  done
}

# Empty BOPT: detach first so writes from a previous state do not linger.
for s in "${socks[@]}"; do "$reblock" detach --unix "$s" >/dev/null; done
run_all "empty BOPT"

# Populated: the whole benchmark region into the read cache, slot i = page i.
jq -n --argjson n "$rc_pages" '{version: 1, page_sectors: 8, policy: "bench",
  ranges: [{fs_page: 0, pages: $n, slot: 0}]}' >"$work/plan.json"
for s in "${socks[@]}"; do
  "$reblock" detach --unix "$s" >/dev/null
  "$reblock" reconfigure --unix "$s" --plan "$work/plan.json" >/dev/null
  until [ "$(status "$s" | jq -r .reconfiguration.state)" = done ]; do sleep 0.2; done
done
status | jq '{mapped_pages, map_heap_bytes,
  map_bytes_per_mapped_page: (if .mapped_pages > 0 then .map_heap_bytes / .mapped_pages else null end)}'
run_all "populated BOPT"
