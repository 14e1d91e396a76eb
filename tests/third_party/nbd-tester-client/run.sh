#!/usr/bin/env bash
# Runs the NBD reference implementation's conformance client, nbd-tester-client, against
# `reblock serve`: every case of the reference implementation's tests/run/simple_test
# whose client side applies to a server other than nbd-server itself. The client's
# sources are copied unmodified from the NetworkBlockDevice/nbd repository (GPL-2.0, see
# COPYING and README.md); they are built here as a separate test program and never
# linked into reblock.
#
#   REBLOCK=path/to/reblock tests/third_party/nbd-tester-client/run.sh [CASE...]
#
# Needs a C compiler, pkg-config and GLib's headers (Debian: libglib2.0-dev); with
# GnuTLS's headers (libgnutls28-dev) the TLS cases run too, else they are skipped.
# Prints one line per case and closes with "N passed, N failed". Cases run side by side,
# NBD_TESTER_JOBS at once (default 2): each has its own server, image and directory, and
# they spend much of their time waiting for fdatasync and for each other's replies.
#
# Nothing here can hang: a client that has not finished within NBD_TESTER_CLIENT_SECS
# (default 300) or a server still running NBD_TESTER_STOP_SECS (default 60) after SIGTERM
# fails its case, printing the stack of every thread of the stuck processes (with gdb when
# it is installed, else the kernel's view from /proc) and the server's log, then is killed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
reblock=${REBLOCK:?set REBLOCK to the reblock binary}
certs=$(cd "$here/../../../crates/nbd/tests/certs" && pwd)
# $top holds the clients and one directory per case; $work is the running case's.
top=$(mktemp -d "${TMPDIR:-/tmp}/nbd-tester.XXXXXX")
work=$top
client_secs=${NBD_TESTER_CLIENT_SECS:-300}
stop_secs=${NBD_TESTER_STOP_SECS:-60}
jobs_max=${NBD_TESTER_JOBS:-2}
server_pid=""
client_pid=""
# Kills what the running case started. SIGKILL: a process left behind would keep the
# caller's output pipe open.
kill_case() {
  [ -n "$client_pid" ] && kill -KILL "$client_pid" 2>/dev/null
  [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null
}
cleanup() {
  local pid
  for pid in $(jobs -p); do
    kill -TERM "$pid" 2>/dev/null
  done
  wait
  kill_case
  rm -rf "$top"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# True while PID runs (a zombie does not count).
running() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
  [ -n "$state" ] && [ "$state" != Z ]
}

# bounded_wait PID SECS: waits for our child PID, returning its exit status, or 124 when
# it still runs after SECS seconds (it is left running).
bounded_wait() {
  local pid=$1 deadline=$(( $(date +%s) + $2 ))
  while running "$pid"; do
    [ "$(date +%s)" -ge "$deadline" ] && return 124
    sleep 0.1
  done
  wait "$pid"
}

# Prints every thread's stack of PID (WHAT names it): gdb's backtraces when gdb is
# installed, and always each thread's name, kernel wait channel and kernel stack.
dump_stacks() {
  local pid=$1 what=$2 t
  echo "=== $what (pid $pid): every thread's stack"
  if command -v gdb >/dev/null; then
    timeout 120 gdb -batch -nx -p "$pid" -ex 'set pagination off' \
      -ex 'thread apply all bt' 2>&1 | grep -v '^\[New LWP' | cut -c1-300
  else
    echo "(gdb is not installed: kernel stacks only)"
  fi
  for t in /proc/"$pid"/task/*; do
    echo "--- thread ${t##*/} $(cat "$t/comm" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null)"
    cat "$t/stack" 2>/dev/null
  done
}

# Kills PID after dumping its threads' stacks into stacks.log.
kill_stuck() {
  dump_stacks "$1" "$2" >>"$work/stacks.log" 2>&1
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

build() {
  local out=$1; shift
  # shellcheck disable=SC2046
  cc -O1 -w -I"$here" -o "$out" "$here/nbd-tester-client.c" "$here/cliserv.c" "$@"
}
if ! glib=$(pkg-config --cflags --libs glib-2.0 2>/dev/null); then
  echo "nbd-tester-client: GLib's headers are missing (apt-get install libglib2.0-dev pkg-config)" >&2
  exit 2
fi
# shellcheck disable=SC2086
build "$top/client" $glib || exit 2
tls=no
if gnutls=$(pkg-config --cflags --libs gnutls 2>/dev/null); then
  # shellcheck disable=SC2086
  build "$top/client-tls" -DHAVE_GNUTLS=1 "$here/buffer.c" "$here/crypto-gnutls.c" $glib $gnutls \
    && tls=yes
fi

# Starts `reblock serve IMAGE ARGS...` and waits for its "serving" line; sets $port for
# TCP servers.
start_server() {
  local img=$1; shift
  : >"$work/server.log"
  "$reblock" serve "$img" --name export1 --control "$work/ctl" "$@" 2>"$work/server.log" &
  server_pid=$!
  local deadline=$(( $(date +%s) + stop_secs ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if grep -q "serving" "$work/server.log"; then
      port=$(sed -n 's|.*nbd://127.0.0.1:\([0-9]*\)/.*|\1|p' "$work/server.log" | head -1)
      return 0
    fi
    running "$server_pid" || break
    sleep 0.1
  done
  if running "$server_pid"; then
    echo "the server did not start serving within $stop_secs s" >>"$work/why.log"
    kill_stuck "$server_pid" "reblock serve (starting)"
  else
    wait "$server_pid"
    echo "the server exited with status $? before serving" >>"$work/why.log"
  fi
  server_pid=""
  return 1
}

# Stops the server with SIGTERM; one that is still running after $stop_secs is dumped and
# killed, and the stop fails.
stop_server() {
  local pid=$server_pid rc
  kill -TERM "$pid" 2>/dev/null
  bounded_wait "$pid" "$stop_secs"
  rc=$?
  if [ $rc = 124 ]; then
    echo "the server did not stop within $stop_secs s of SIGTERM" >>"$work/why.log"
    kill_stuck "$pid" "reblock serve"
  fi
  server_pid=""
  return $rc
}

# run_client ARGS...: runs the client, for at most $client_secs; a client still running
# then is dumped and killed together with the server it waits for.
run_client() {
  "$@" >"$work/client.log" 2>&1 &
  client_pid=$!
  bounded_wait "$client_pid" "$client_secs"
  local rc=$?
  if [ $rc = 124 ]; then
    echo "the client did not finish within $client_secs s" >>"$work/why.log"
    kill_stuck "$server_pid" "reblock serve"
    kill_stuck "$client_pid" "nbd-tester-client"
    server_pid=""
  fi
  client_pid=""
  return $rc
}

# A formatted 50 MiB image (the size simple_test gives its integrity tests), made once:
# each case starts from a copy of it.
pristine_image() {
  work=$top
  : >"$work/why.log"
  : >"$work/stacks.log"
  start_server "$top/pristine.img" --create 50M --bopt-size 8M --tcp 127.0.0.1:0 && stop_server
}

# run_one_case NAME "SERVER ARGS" CLIENT ARGS...: serves a fresh image in the case's own
# directory, runs the client, prints the case's PASS/FAIL line and its logs, and leaves
# "yes" or "no" in $top/NAME.ok. @SOCK@ in either's arguments is the case's Unix socket.
run_one_case() {
  local name=$1 server_args=$2; shift 2
  local ok=yes started
  started=$(date +%s)
  work=$top/$name
  server_args=${server_args//@SOCK@/$work/nbd.sock}
  mkdir -p "$work"
  trap kill_case EXIT
  trap 'exit 130' INT TERM
  : >"$work/client.log"
  : >"$work/why.log"
  : >"$work/stacks.log"
  cp --sparse=always "$top/pristine.img" "$work/disk.img" \
    || { echo "copying the fresh image failed" >>"$work/why.log"; ok=no; }
  # shellcheck disable=SC2086
  if [ $ok = yes ] && start_server "$work/disk.img" $server_args; then
    local args=("$@")
    args=("${args[@]//@PORT@/$port}")
    args=("${args[@]//@SOCK@/$work/nbd.sock}")
    run_client "${args[@]}" || ok=no
    [ -z "$server_pid" ] || stop_server || {
      echo "the server did not stop cleanly" >>"$work/why.log"
      ok=no
    }
  else
    ok=no
  fi
  if [ $ok = yes ]; then
    echo "PASS $name ($(( $(date +%s) - started )) s)"
  else
    echo "FAIL $name ($(( $(date +%s) - started )) s)"
    sed 's/^/  why: /' "$work/why.log"
    # The client rewrites its progress line with carriage returns: its end, in bytes.
    echo "  client log (its last 3000 bytes):"
    tail -c 3000 "$work/client.log" | tr '\r' '\n' | tail -30 | sed 's/^/  | /'
    echo "  server log (last 100 lines):"
    tail -100 "$work/server.log" | sed 's/^/  | /'
    sed 's/^/  | /' "$work/stacks.log"
  fi
  rm -f "$work/disk.img"
  echo $ok >"$top/$name.ok"
}

passed=0
failed=0
skipped=0
cases=()
printed=0
# Prints, in the order the cases were started, the output of every finished case not yet
# printed, stopping at the first one still running. With "all" (every case has ended), a
# case that left no verdict died on the way: it failed.
print_finished() {
  while [ $printed -lt ${#cases[@]} ]; do
    local name=${cases[$printed]}
    [ -e "$top/$name.ok" ] || [ "${1:-}" = all ] || return 0
    cat "$top/$name.out"
    if [ "$(cat "$top/$name.ok" 2>/dev/null)" = yes ]; then
      passed=$((passed + 1))
    else
      [ -e "$top/$name.ok" ] || echo "FAIL $name (it ended without a verdict)"
      failed=$((failed + 1))
    fi
    printed=$((printed + 1))
  done
}

# run_case NAME "SERVER ARGS" CLIENT ARGS...: starts the case in the background, once
# fewer than $jobs_max cases run.
run_case() {
  local name=$1
  if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " =~ " $name " ]]; then
    return
  fi
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
    wait -n
    [ $? -ne 127 ] || break # no child left to wait for
    print_finished
  done
  cases+=("$name")
  ( run_one_case "$@" ) >"$top/$name.out" 2>&1 &
}

skip() {
  echo "SKIP $1: $2"
  skipped=$((skipped + 1))
}

wanted=("$@")
if ! pristine_image; then
  echo "FAIL formatting a fresh image"
  sed 's/^/  why: /' "$top/why.log"
  tail -100 "$top/server.log" | sed 's/^/  | /'
  sed 's/^/  | /' "$top/stacks.log"
  exit 1
fi
c=$top/client
tcp="--tcp 127.0.0.1:0"
if [ $tls = yes ]; then
  tlsargs="$tcp --tls require --tls-cert $certs/server-cert.pem --tls-key $certs/server-key.pem"
  ct=("$top/client-tls" -C "$certs/client-cert.pem" -K "$certs/client-key.pem" -A "$certs/ca-cert.pem")
fi
# The longest cases first, so that the short ones fill in beside them.
run_case integrityhuge "$tcp" "$c" -N export1 -i -t "$here/integrityhuge-test.tr" localhost @PORT@
if [ $tls = yes ]; then
  run_case tlshuge "$tlsargs" "${ct[@]}" -N export1 -i -t "$here/integrityhuge-test.tr" -H localhost 127.0.0.1 @PORT@
fi
run_case flush "$tcp" "$c" -N export1 -w -f localhost @PORT@
run_case cfg1 "$tcp" "$c" -N export1 127.0.0.1 @PORT@
run_case cfgnew "$tcp" "$c" -N export1 localhost @PORT@
run_case cfgsize "$tcp" "$c" -o -N export1 127.0.0.1 @PORT@
run_case cfgmulti "$tcp" "$c" -N export1 localhost @PORT@
run_case cfgmulti-readonly "$tcp --read-only" "$c" -N export1 localhost @PORT@
run_case write "$tcp" "$c" -N export1 -w localhost @PORT@
run_case rowrite "$tcp --read-only" "$c" -N export1 -w -F localhost @PORT@
run_case unix "--unix @SOCK@" "$c" -N export1 -u @SOCK@
run_case handshake "$tcp" "$c" -h -N export1 localhost @PORT@
run_case integrity "$tcp" "$c" -N export1 -i -t "$here/integrity-test.tr" localhost @PORT@
if [ $tls = yes ]; then
  run_case tls "$tlsargs" "${ct[@]}" -N export1 -i -t "$here/integrity-test.tr" localhost @PORT@
else
  skip tls "GnuTLS headers missing (libgnutls28-dev)"
  skip tlshuge "GnuTLS headers missing (libgnutls28-dev)"
fi
# Not applicable: dirconfig, tree, rotree, list, inetd (nbd-server's own configuration,
# tree files and inetd mode; their client side is cfg1/write/rowrite above), tlswrongcert
# (client certificates are not checked), nlconnect, connstatus, persist (the kernel client).
wait
print_finished all
echo "nbd-tester-client: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
