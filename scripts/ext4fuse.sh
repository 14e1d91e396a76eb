#!/usr/bin/env bash
# Checks FS2 under a real file system: ext4 on a served image (nbdfuse exposes the export
# as a file, a loop device makes it a block device), files written and deleted, `fstrim`,
# files read cold until replicas exist; then
#   1. with ext4 unmounted: every block `reblock freemap` finds free reads as a hole in
#      `nbdinfo --map` (the server's free-space map matches the file system's);
#   2. CRASHES times: with ext4 mounted and replicas present, SIGKILL the server, restart
#      it, mount (journal replay), unmount, `e2fsck -fn` must be clean and every file
#      synced before the kill must have its md5;
#   3. `reblock check` of the stopped image.
#
# Usage (as root): scripts/ext4fuse.sh [DIR]   (DIR: scratch directory, default mktemp -d)
# Env: REBLOCK (binary, default target/release/reblock), CRASHES (default 2),
#      SIZE (data area, default 768M), SERVE_FLAGS (extra serve flags; default none).
# Needs nbdfuse, nbdinfo (libnbd-bin), losetup, mkfs.ext4, e2fsck, fstrim, python3.
set -euo pipefail
case "${1:-}" in
-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
-*) echo "ext4fuse: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "ext4fuse: needs root (loop device, mount)" >&2; exit 1; }
bin=${REBLOCK:-target/release/reblock}
bin=$(readlink -f "$bin")
dir=$(readlink -f "${1:-$(mktemp -d)}")
crashes=${CRASHES:-2}
size=${SIZE:-768M}
mkdir -p "$dir/fuse" "$dir/mnt"
img=$dir/img
sock=$dir/sock
server= fuse= loop=
# shellcheck source=scripts/fs2_common.sh
. "$(dirname "$0")/fs2_common.sh"

attach() { # nbdfuse + loop device over the export
    nbdfuse "$dir/fuse/nbd" --unix "$sock" 2>>"$dir/nbdfuse.log" &
    fuse=$!
    for _ in $(seq 100); do [ -e "$dir/fuse/nbd" ] && break; sleep 0.1; done
    [ -e "$dir/fuse/nbd" ] || fail "nbdfuse did not start"
    loop=$(losetup -f --show "$dir/fuse/nbd")
}
mounted() { grep -q " $1 " /proc/mounts; } # (mountpoint(1) fails on a dead FUSE mount)
unmount() { mounted "$1" && { umount "$1" 2>/dev/null || umount -l "$1"; }; true; }
detach() { # everything above the server, in order; tolerant of a dead server
    unmount "$dir/mnt"
    [ -n "$loop" ] && { losetup -d "$loop" 2>/dev/null || true; loop=; }
    unmount "$dir/fuse"
    [ -n "$fuse" ] && { wait "$fuse" 2>/dev/null || true; fuse=; }
}
stop_server() { [ -n "$server" ] && { kill "$server"; wait "$server" 2>/dev/null || true; server=; }; }
cleanup() { detach; [ -n "$server" ] && kill -9 "$server" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT

read_cold_until_replicas() { # read the .py files cold (page cache dropped) until replicas
    local n=0
    while [ "$(status | field replicas)" = 0 ] && [ "$n" -lt 6 ]; do
        sync; echo 3 > /proc/sys/vm/drop_caches
        { find "$dir/mnt/py" -name '*.py' || true; } | head -400 | xargs cat >/dev/null
        n=$((n + 1)); sleep 1
    done
    [ "$(status | field replicas)" -gt 0 ] || fail "no replicas after $n rounds"
    # One more cold round: these reads may be served by the replicas.
    sync; echo 3 > /proc/sys/vm/drop_caches
    { find "$dir/mnt/py" -name '*.py' || true; } | head -400 | xargs cat >/dev/null
    say "replicas $(status | field replicas), replica_hits $(status | field replica_hits)" \
        "after $((n + 1)) cold read rounds"
}

say "serve $img --create $size --replan-policy fs2 ${SERVE_FLAGS:-}; ext4 over nbdfuse + loop"
start_server --create "$size"
attach
mkfs.ext4 -q -F "$loop"
mount "$loop" "$dir/mnt"
# A Python standard library (the system's, ~50 MB) without installed packages.
py=$(ls -d /usr/lib/python3.[0-9]* 2>/dev/null | head -1)
[ -n "$py" ] || py=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
mkdir "$dir/mnt/py"
tar -C "$py" --exclude=site-packages --exclude=dist-packages --exclude=__pycache__ -cf - . |
    tar -C "$dir/mnt/py" -xf -
for i in $(seq 12); do head -c $(((7 + i * 28 / 12) * 1048576)) /dev/urandom > "$dir/mnt/big$i"; done
sync
rm -f "$dir/mnt"/big{1..8}
rm -rf "$dir/mnt/py/test"
sync
say "fstrim: $(fstrim -v "$dir/mnt")"
say "free_pages $(status | field free_pages)"
read_cold_until_replicas

check_map() { # every block free in ext4 is a hole in the export's block status
    umount "$dir/mnt"
    "$bin" freemap "$loop" --unit bytes --json >"$dir/free.json"
    nbdinfo --map --json "nbd+unix:///?socket=$sock" >"$dir/map.json"
    python3 - "$dir/free.json" "$dir/map.json" "$loop" <<'PY'
import json, sys
free = json.load(open(sys.argv[1])); bs = free["block_size"]
m = json.load(open(sys.argv[2]))
holes = set()
for e in m:
    if e["type"] & 1:  # NBD_STATE_HOLE
        holes.update(range(e["offset"] // bs, (e["offset"] + e["length"]) // bs))
freeb = set()
for x in free["extents"]:
    freeb.update(range(x["start"] // bs, (x["start"] + x["len"]) // bs))
missing = len(freeb - holes)
# A hole ext4 counts as allocated (written by nobody since mkfs or the trim) must read
# zeros, as BLOCK_STATUS promises.
nonzero = 0
with open(sys.argv[3], "rb") as dev:
    for b in sorted(holes - freeb):
        dev.seek(b * bs)
        nonzero += any(dev.read(bs))
print(f"ext4 free blocks {len(freeb)}, holes {len(holes)}, free but not a hole {missing},"
      f" holes ext4 allocated {len(holes - freeb)} (not zero: {nonzero})")
sys.exit(1 if missing or nonzero else 0)
PY
    mount "$loop" "$dir/mnt"
}
map=$(check_map) || fail "map: $map"; say "map: $map"

for c in $(seq "$crashes"); do
    head -c $((4 * 1048576)) /dev/urandom > "$dir/mnt/new$c"
    sync
    (cd "$dir/mnt" && find . -type f -print0 | sort -z | xargs -0 md5sum) >"$dir/md5.$c"
    read_cold_until_replicas
    say "crash $c: SIGKILL with ext4 mounted, replicas $(status | field replicas)"
    kill -9 "$server"; wait "$server" 2>/dev/null || true; server=
    detach
    start_server
    attach
    mount "$loop" "$dir/mnt"
    umount "$dir/mnt"
    e2fsck -fn "$loop" >"$dir/fsck.$c" 2>&1 || { cat "$dir/fsck.$c" >&2; fail "e2fsck after crash $c"; }
    mount "$loop" "$dir/mnt"
    bad=$(cd "$dir/mnt" && md5sum --quiet -c "$dir/md5.$c" 2>&1 | wc -l)
    [ "$bad" = 0 ] || fail "crash $c: $bad md5 mismatches"
    say "crash $c: e2fsck -fn clean, $(wc -l <"$dir/md5.$c") files' md5 match"
done
map=$(check_map) || fail "map: $map"; say "map: $map"
detach
stop_server
"$bin" check "$img" --json >"$dir/check.json" || { cat "$dir/check.json" >&2; fail "check"; }
say "check: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print({k: d[k] for k in ("replicas", "problems")})' "$dir/check.json")"
say "PASS"
