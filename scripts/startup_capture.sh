#!/usr/bin/env bash
# Records an application start-up workload with `reblock record`: an ext4 file system on
# a loop device holds a small Debian system (Python 3.11 with a venv of numpy, pandas and
# matplotlib, node, gcc with binutils and the C headers, perl), and every "day" the page
# cache is dropped and the same programs are started once, cold.
#
# Usage (as root): scripts/startup_capture.sh [OUT_DIR] [DAYS] [IMAGE_GIB]
#   OUT_DIR defaults to /work/captures; DAYS to 7; IMAGE_GIB to 4.
# Needs: losetup, mkfs.ext4, chroot, dpkg, apt-cache, pip (network to PyPI), the Debian
# packages python3.11, nodejs, gcc-12, binutils and libc6-dev installed on this machine
# (their files are copied into the image), unshare (util-linux), and `reblock` on PATH or
# REBLOCK=path. The image is mounted in a private mount namespace: other processes do not
# see OUT_DIR/mnt while the script runs, so they cannot add reads to the recorded days.
# Writes OUT_DIR/startup.trace.txt, OUT_DIR/startup.meta.json, OUT_DIR/startup.img and
# OUT_DIR/startup.log; also the recorder's startup.trace.txt.meta.json and
# startup.record.json, and startup.files (the files copied into the image).
set -euo pipefail

case "${1:-}" in
-h | --help)  # the comment above, without its first line
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
    exit 0 ;;
-*) echo "startup_capture: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
OUT=${1:-/work/captures}
DAYS=${2:-7}
GIB=${3:-4}
REBLOCK=${REBLOCK:-reblock}
IMG=$OUT/startup.img
MNT=$OUT/mnt
TRACE=$OUT/startup.trace.txt
META=$OUT/startup.meta.json
LOG=$OUT/startup.log
PACKAGES="bash dash coreutils python3.11 python3.11-minimal libpython3.11-stdlib nodejs
gcc-12 cpp-12 binutils libc6-dev libc-bin"

[ "$(id -u)" = 0 ] || { echo "startup_capture: needs root (loop device, mount, tracefs)" >&2; exit 1; }
# The image is mounted in a mount namespace of its own, so that nothing else on the machine
# (updatedb, a backup, someone's `find /`) walks it and adds its reads, and the journal
# writes of its atime updates, to the recorded days: one stray `find /` during day 2 of a
# 5-day capture added 3,254 reads and 1,793 writes to that day (borg 0.742x -> 0.767x).
if [ -z "${STARTUP_CAPTURE_PRIVATE:-}" ]; then
    STARTUP_CAPTURE_PRIVATE=1 exec unshare --mount --propagation private bash "$0" "$@"
fi
mkdir -p "$OUT" "$MNT"
exec 3>>"$LOG"
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a /dev/fd/3 >&2; }

LOOP=""
cleanup() {
    for d in tmp dev proc; do mountpoint -q "$MNT/$d" && umount "$MNT/$d"; done
    mountpoint -q "$MNT" && umount "$MNT"
    [ -n "$LOOP" ] && losetup -d "$LOOP"
    true
}
trap cleanup EXIT

say "image $IMG (${GIB} GiB), ext4 on a loop device with direct I/O"
rm -f "$IMG"
truncate -s "${GIB}G" "$IMG"
LOOP=$(losetup --direct-io=on -f --show "$IMG")
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$LOOP"
mount -o rw,relatime "$LOOP" "$MNT"

# Age the file system: fill a quarter of it with files of mixed sizes in many
# directories, then delete every other one, so the installed programs land in holes the
# way they do on a disk that has been in use, not in one fresh sequential run.
say "ageing: filler files, then every other one deleted"
python3 - "$MNT/filler" "$GIB" <<'PY'
import os, random, sys
root, gib = sys.argv[1], int(sys.argv[2])
rng = random.Random(12)
budget = gib * (1 << 30) // 4
files = []
n = 0
while budget > 0:
    d = os.path.join(root, f"d{n % 64:02d}")
    os.makedirs(d, exist_ok=True)
    size = min(budget, rng.choice([4096, 16384, 65536, 262144, 1 << 20, 4 << 20]))
    p = os.path.join(d, f"f{n:06d}")
    with open(p, "wb") as f:
        f.write(os.urandom(min(size, 65536)) * (size // min(size, 65536)))
    files.append(p)
    budget -= size
    n += 1
for p in files[::2]:
    os.remove(p)
PY
sync

# The packages the programs need, with their installed dependencies (dpkg's file lists).
say "copying the files of the packages into the image"
closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances $PACKAGES 2>/dev/null | grep -v '^ ' | grep -v '<' | sort -u)
installed=$(for p in $closure; do
    dpkg-query -W -f='${Status} ${Package}\n' "$p" 2>/dev/null | awk '/^install ok installed/ {print $4}'
done | sort -u)
for p in $installed; do dpkg -L "$p"; done | sort -u | grep -v '^/\.$' | grep '^/' |
    while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "${f#/}"; done > "$OUT/startup.files"
# Debian's merged /usr: the top-level directories are links into usr/, made first so
# that the archive's bin/..., lib/... land in usr/.
for l in bin lib lib64 sbin; do mkdir -p "$MNT/usr/$l"; ln -sfn "usr/$l" "$MNT/$l"; done
tar -C / --no-recursion -cf - -T "$OUT/startup.files" |
    tar -C "$MNT" --keep-directory-symlink -xf -
mkdir -p "$MNT/etc" "$MNT/proc" "$MNT/dev" "$MNT/tmp" "$MNT/home/user/app" "$MNT/root"
cp -a /etc/passwd /etc/group /etc/ld.so.conf "$MNT/etc/"
cp -a /etc/ld.so.conf.d "$MNT/etc/" 2>/dev/null || true
ldconfig -r "$MNT"
mount --bind /proc "$MNT/proc"
mount --bind /dev "$MNT/dev"
mount -t tmpfs tmpfs "$MNT/tmp"
in_root() { chroot "$MNT" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/home/user \
    MPLCONFIGDIR=/home/user/.config/matplotlib "$@"; }
in_root /usr/bin/python3.11 -m compileall -q /usr/lib/python3.11 >/dev/null || true

say "venv with numpy, pandas and matplotlib (wheels from PyPI)"
in_root /usr/bin/python3.11 -m venv --without-pip /opt/venv
python3 -m pip install -q --no-warn-script-location --only-binary=:all: \
    --target "$MNT/opt/venv/lib/python3.11/site-packages" numpy pandas matplotlib
rm -rf "$MNT/filler/d0"[0-3]  # a little more churn after the install

# The applications started every day.
cat > "$MNT/home/user/app/hello.c" <<'C'
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    double s = 0;
    for (int i = 1; i < 1000; i++) s += sqrt((double)i);
    char buf[64];
    snprintf(buf, sizeof buf, "%.3f", s);
    printf("%s %zu\n", buf, strlen(buf) + (size_t)argc + (argv[0] != NULL));
    return EXIT_SUCCESS;
}
C
cat > "$MNT/home/user/app/app.js" <<'JS'
const fs = require('fs'), zlib = require('zlib'), crypto = require('crypto');
const http = require('http'), url = require('url'), util = require('util');
const data = fs.readFileSync('/home/user/app/data.csv');
const z = zlib.gzipSync(data);
console.log(crypto.createHash('sha256').update(z).digest('hex').slice(0, 16),
            typeof http.createServer, url.parse('http://x/y').path, util.format('%d', 1));
JS
cat > "$MNT/home/user/app/plot.py" <<'PY'
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
df = pd.read_csv("/home/user/app/data.csv")
fig, ax = plt.subplots()
ax.plot(df["x"], np.cumsum(df["y"]))
fig.savefig("/home/user/app/plot.png")
PY
python3 -c "
import random
r = random.Random(1)
print('x,y')
for i in range(2000): print(f'{i},{r.random():.4f}')" > "$MNT/home/user/app/data.csv"

run_apps() {
    local app
    for app in \
        "/opt/venv/bin/python -c 'import numpy, pandas, matplotlib.pyplot'" \
        "/opt/venv/bin/python /home/user/app/plot.py" \
        "/usr/bin/node -e \"require('zlib'); require('crypto'); require('http'); console.log(process.version)\"" \
        "/usr/bin/node /home/user/app/app.js" \
        "/usr/bin/gcc-12 -O2 -o /home/user/app/hello /home/user/app/hello.c -lm" \
        "/home/user/app/hello" \
        "/usr/bin/python3.11 -c 'import json, sqlite3, email.parser, http.client, xml.etree.ElementTree, asyncio'" \
        "/usr/bin/perl -e 'use POSIX; use Data::Dumper; print Dumper([1])'"; do
        in_root /bin/sh -c "$app" >/dev/null
        sleep 0.5
    done
}
say "warm-up start of every program (first-run caches, not recorded)"
run_apps
sync

say "recording $DAYS days on $LOOP"
"$REBLOCK" record --device "$LOOP" --out "$TRACE" --json > "$OUT/startup.record.json" &
REC=$!
sleep 3
mono_ns() { python3 -c 'import time; print(time.monotonic_ns())'; }
days_json=""
for day in $(seq 1 "$DAYS"); do
    sync
    echo 3 > /proc/sys/vm/drop_caches
    sleep 1
    s=$(mono_ns)
    run_apps
    e=$(mono_ns)
    say "day $day: $(( (e - s) / 1000000 )) ms"
    days_json+=$(printf '%s{"day": %d, "start_ns": %d, "end_ns": %d}' "${days_json:+, }" "$day" "$s" "$e")
    sleep 2
done
sync
sleep 2
kill -INT "$REC"
wait "$REC"
say "recorder: $(cat "$OUT/startup.record.json")"

SECTORS=$(blockdev --getsz "$LOOP")
python3 - "$TRACE" "$META" "$SECTORS" "$DAYS" "[$days_json]" <<'PY'
import json, sys
trace, meta, sectors, days, day_spans = sys.argv[1:6]
reads = writes = 0
seen = set()
for line in open(trace):
    if not line.strip() or line.startswith("#"):
        continue
    f = line.split()
    start, size, op = int(f[-3]), int(f[-2]), f[-1]
    if op.startswith("R"):
        reads += 1
    else:
        writes += 1
    seen.update(range(start // 8, (start + size + 7) // 8))
json.dump({
    "name": "startup",
    "workload": "application start-up",
    "description": f"{days} days of cold application start-ups on ext4 (aged, 4 KiB blocks) on a loop device: "
        "each day the page cache is dropped and the same programs start once: python (venv) "
        "importing numpy, pandas and matplotlib.pyplot; a pandas+matplotlib plot to PNG; node -e "
        "loading core modules; node running a script (read, gzip, sha256); gcc-12 -O2 compiling and "
        "linking a small C file; the compiled program; python3.11 importing stdlib modules; perl "
        "with POSIX and Data::Dumper. Setup, package copy and one warm-up start are not recorded.",
    "device_sectors": int(sectors),
    "fs_type": "ext4",
    "trace_format": "<timestamp_ns> <pid> <command> <start_sector_512B> <size_in_sectors> <R|W>",
    "requests": reads + writes, "reads": reads, "writes": writes,
    "unique_MiB": round(len(seen) * 4096 / 2**20, 2),
    "days": json.loads(day_spans),
    "day_times": "CLOCK_MONOTONIC ns, the clock of the trace's timestamps",
}, open(meta, "w"), indent=1)
PY
say "wrote $TRACE and $META"
