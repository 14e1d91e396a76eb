#!/usr/bin/env bash
# Measure what online learning buys on an emulated disk: replay one trace through
# `reblock serve --emulate MODEL` with the defaults (learning + the guard) and with
# `--replan-policy vanilla` (no learning), and compare the emulated busy time.
#
# Usage: scripts/online_benefit.sh TRACE [SIZE] [MODEL] [SPEED] [-- extra serve flags]
#   TRACE  a block trace `reblock replay` reads (e.g. /work/captures/startup.trace.txt)
#   SIZE   data-area size of the fresh image (default 4G: the start-up capture's device)
#   MODEL  disk model to emulate (default hdd:wd2500aaks)
#   SPEED  emulated time and replay run this many times faster than real time (default 10),
#          or `closed`: the CLI's own defaults, emulated time at real speed and `reblock
#          replay` in closed loop (one request outstanding, next sent when it completes).
#          SPEED > 1 is quicker but counts the host's planning time SPEED times over (the
#          trace is compressed, the planner is not), which makes online look worse: measured
#          on the start-up capture, 0.77-0.81x at 10, 0.73-0.74x at 1, 0.69-0.70x closed.
# Env: REBLOCK (binary, default target/release/reblock), CONFIGS (default "defaults vanilla").
# Prints one JSON line per configuration, then the ratio defaults / vanilla.
set -euo pipefail
pos=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do pos+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
extra=("$@")
trace=${pos[0]:?usage: online_benefit.sh TRACE [SIZE] [MODEL] [SPEED] [-- serve flags]}
size=${pos[1]:-4G}
model=${pos[2]:-hdd:wd2500aaks}
speed=${pos[3]:-10}
pacing=(--speed "$speed")
if [ "$speed" = closed ]; then speed=1; pacing=(--queue-depth 1); fi
bin=${REBLOCK:-target/release/reblock}
configs=${CONFIGS:-defaults vanilla}
work=$(mktemp -d)
server=
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null; [ -z "${KEEP:-}" ] && rm -rf "$work"; }
trap cleanup EXIT
[ -n "${KEEP:-}" ] && { work=$KEEP; mkdir -p "$work"; }

run() { # NAME [serve flags...]: one fresh image, one replay, the status after it
    local name=$1; shift
    local dir=$work/$name
    mkdir -p "$dir"
    "$bin" serve "$dir/img" --create "$size" --emulate "$model" --emulate-speed "$speed" \
        --unix "$dir/sock" "$@" "${extra[@]}" 2>"$dir/serve.log" &
    server=$!
    for _ in $(seq 300); do [ -S "$dir/sock" ] && break; sleep 0.1; done
    [ -S "$dir/sock" ] || { cat "$dir/serve.log" >&2; echo "serve did not start" >&2; exit 1; }
    "$bin" replay "$trace" --unix "$dir/sock" "${pacing[@]}" --json >"$dir/replay.json"
    # Let the background copier and the last re-plan settle before reading the status.
    sleep "${SETTLE_S:-2}"
    "$bin" status --unix "$dir/sock" --json >"$dir/status.json"
    kill "$server"; wait "$server" || true; server=
    python3 - "$name" "$dir" <<'PY'
import json, sys
name, d = sys.argv[1], sys.argv[2]
s = json.load(open(d + "/status.json")); r = json.load(open(d + "/replay.json"))
rp = s.get("replan") or {}
print(json.dumps({"config": name, "emulated_busy_s": s.get("emulated_busy_s"),
    "hit_rate": s.get("hit_rate"), "requests": r["requests"], "errors": r["errors"],
    "latency_mean_us": r["latency_mean_us"],
    "admitted": rp.get("admitted"), "refused": rp.get("refused"), "sent_home": rp.get("sent_home"),
    "plans": rp.get("plans"), "last_admission_reason": rp.get("last_admission_reason"),
    "bytes_moved": s.get("bytes_moved"), "steps_done": s.get("steps_done"),
    "steps_pending": (s.get("reconfiguration") or {}).get("steps_pending"),
    "copier_requests": s.get("copier_requests"), "piggybacked_pages": s.get("piggybacked_pages")}))
PY
}

for c in $configs; do
    case $c in
        defaults) run defaults | tee "$work/defaults.line" ;;
        vanilla) run vanilla --replan-policy vanilla | tee "$work/vanilla.line" ;;
        plain) run plain --replan-policy vanilla --write-buffer 0 | tee "$work/plain.line" ;;
        *) echo "unknown configuration $c (defaults, vanilla, plain)" >&2; exit 2 ;;
    esac
done
if [ -f "$work/defaults.line" ] && [ -f "$work/vanilla.line" ]; then
    python3 - "$work/defaults.line" "$work/vanilla.line" <<'PY'
import json, sys
d, v = (json.loads(open(p).read()) for p in sys.argv[1:])
print(json.dumps({"defaults_over_vanilla": round(d["emulated_busy_s"] / v["emulated_busy_s"], 3)}))
PY
fi
