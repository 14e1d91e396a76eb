# Shared by scripts/fs2online.sh and scripts/ext4fuse.sh (sourced, not run): start
# `reblock serve` with FS2's replicas on $img at $sock, read its status.
# Needs $bin, $img, $sock, $dir set, and `server` declared by the caller.

say() { echo "[$(date -u +%H:%M:%S)] $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# Any other command that fails stops the script (set -e): say where.
trap 'echo "FAIL: ${BASH_SOURCE[0]}:$LINENO: $BASH_COMMAND" >&2' ERR

start_server() { # [serve flags...]: serve $img with --replan-policy fs2 and $SERVE_FLAGS
    rm -f "$sock"
    # shellcheck disable=SC2086
    "$bin" serve "$img" --unix "$sock" --replan-policy fs2 ${SERVE_FLAGS:-} "$@" \
        2>>"$dir/serve.log" &
    server=$!
    for _ in $(seq 300); do [ -S "$sock" ] && return 0; sleep 0.1; done
    cat "$dir/serve.log" >&2
    fail "serve did not start"
}
status() { "$bin" status --unix "$sock" --json; }
field() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[sys.argv[1]])' "$1"; }
