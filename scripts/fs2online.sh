#!/usr/bin/env bash
# Checks FS2 online on a served image, end to end, with the server's defaults: write
# 256 MiB, trim 128 MiB of it, read a hot part repeatedly until `status --json` shows
# replicas; then overwrite replicated blocks and write into the trimmed space that holds
# the replicas, read every byte back, SIGKILL the server, restart it and read everything
# back again (ROUNDS times, each round replicating and overwriting again), and finally
# `reblock check` the stopped image.
#
# Usage: scripts/fs2online.sh [DIR]   (DIR: scratch directory, default a fresh mktemp -d)
# Env: REBLOCK (binary, default target/release/reblock), ROUNDS (SIGKILL rounds, default 3),
#      SERVE_FLAGS (extra serve flags, e.g. "--replan-policy borg+fs2"; default none).
# Needs qemu-io (qemu-utils). Prints one line per step; exits 1 on the first failure.
set -euo pipefail
case "${1:-}" in
-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
-*) echo "fs2online: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
bin=${REBLOCK:-target/release/reblock}
dir=${1:-$(mktemp -d)}
rounds=${ROUNDS:-3}
mkdir -p "$dir"
img=$dir/img
sock=$dir/sock
url="nbd+unix:///?socket=$sock"
server=
cleanup() { [ -n "$server" ] && kill -9 "$server" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT
# shellcheck source=scripts/fs2_common.sh
. "$(dirname "$0")/fs2_common.sh"

io() { qemu-io -f raw "$@" "$url" >"$dir/io.out" 2>&1 || { cat "$dir/io.out" >&2; fail "qemu-io $*"; }; }
# The hot part: 32 single pages, 16 at the start of the written area and 16 after the
# trimmed range, 4 MiB apart (so FS2 has something to bring next to one another).
hot_mib() { for i in $(seq 0 15); do echo $((i * 4)) $((192 + i * 4)); done | tr ' ' '\n'; }

read_hot_until_replicas() { # ROUND: read the hot part until replicas exist (<= 30 s)
    local cmds=() t0 n=0 reps=0
    for m in $(hot_mib); do cmds+=(-c "read ${m}M 4k"); done
    t0=$(date +%s.%N)
    while :; do
        for _ in $(seq 10); do io "${cmds[@]}"; done
        n=$((n + 320))
        reps=$(status | field replicas)
        [ "$reps" -gt 0 ] && break
        [ "$(echo "$(date +%s.%N) - $t0 > 30" | bc)" = 1 ] && fail "no replicas after $n reads (30 s)"
    done
    sleep 1 # let the background copier finish what it started
    say "round $1: replicas $(status | field replicas) after $n hot reads," \
        "$(echo "$(date +%s.%N) - $t0" | bc | cut -c1-5) s"
    for _ in $(seq 3); do io "${cmds[@]}"; done
    say "round $1: replica_hits $(status | field replica_hits)"
}

# Expected content, as qemu-io -P patterns over the whole 1 GiB export.
declare -A want=()
expect() { # START_MIB LEN_MIB PATTERN
    local m
    for m in $(seq "$1" $(($1 + $2 - 1))); do want[$m]=$3; done
}
verify() { # WHAT: every MiB read with its pattern; a MiB starting with a hot page in two
    local cmds=() m n
    for m in $(seq 0 1023); do
        if [ -n "${hot[$m]:-}" ]; then
            cmds+=(-c "read -P ${hot[$m]} ${m}M 4k")
            cmds+=(-c "read -P ${want[$m]} $((m * 1048576 + 4096)) 1044480")
        else
            cmds+=(-c "read -P ${want[$m]} ${m}M 1M")
        fi
    done
    # The hot pages twice more: those reads go to whichever copy is closest, replicas too.
    for _ in 1 2; do for m in $(hot_mib); do cmds+=(-c "read -P ${hot[$m]} ${m}M 4k"); done; done
    n=$((${#cmds[@]} / 2))
    local hits bad
    hits=$(status | field replica_hits)
    qemu-io -f raw "${cmds[@]}" "$url" >"$dir/verify.out" 2>&1 || true
    bad=$(grep -c -i "pattern verification failed\|error" "$dir/verify.out" || true)
    [ "$bad" = 0 ] || { grep -i -m5 "fail\|error" "$dir/verify.out" >&2; fail "$1: $bad of $n checks"; }
    say "$1: $n pattern checks, 0 failures ($(( $(status | field replica_hits) - hits )) served by" \
        "replicas; replicas $(status | field replicas))"
}

say "serve $img --create 1G --bopt-size 64M --replan-policy fs2 ${SERVE_FLAGS:-}"
start_server --create 1G --bopt-size 64M
io -c "write -P 0x11 0 256M"
io -c "discard 64M 128M"
free=$(status | field free_pages)
say "wrote 256 MiB, trimmed 128 MiB (32768 pages): free_pages $free"
[ "$free" -ge 32768 ] || fail "free_pages $free < 32768 trimmed pages"
expect 0 64 0x11; expect 64 128 0x00; expect 192 64 0x11; expect 256 768 0x00
declare -A hot=()
for m in $(hot_mib); do hot[$m]=0x11; done

for round in $(seq "$rounds"); do
    read_hot_until_replicas "$round"
    # Overwrite every other hot page (their replicas must go) and write the whole
    # trimmed range (where the replicas live) with this round's pattern.
    p=$(printf '0x%02x' $((0x20 + round)))
    cmds=()
    i=0
    for m in $(hot_mib); do
        if [ $((i % 2)) = 0 ]; then cmds+=(-c "write -P $p ${m}M 4k"); hot[$m]=$p; fi
        i=$((i + 1))
    done
    q=$(printf '0x%02x' $((0x40 + round)))
    cmds+=(-c "write -P $q 64M 128M")
    io "${cmds[@]}"
    expect 64 128 "$q"
    say "round $round: overwrote 16 hot pages ($p) and the trimmed 128 MiB ($q); replicas $(status | field replicas)"
    verify "round $round, before SIGKILL"
    kill -9 "$server"; wait "$server" 2>/dev/null || true; server=
    start_server
    verify "round $round, after SIGKILL + restart"
done
kill "$server"; wait "$server" 2>/dev/null || true; server=
"$bin" check "$img" --json >"$dir/check.json" || { cat "$dir/check.json" >&2; fail "check"; }
say "check: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print({k: d[k] for k in d if k in ("ok","problems","replicas")})' "$dir/check.json")"
say "PASS"
