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
# Prints one line per case and closes with "N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
reblock=${REBLOCK:?set REBLOCK to the reblock binary}
certs=$(cd "$here/../../../crates/nbd/tests/certs" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/nbd-tester.XXXXXX")
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

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
build "$work/client" $glib || exit 2
tls=no
if gnutls=$(pkg-config --cflags --libs gnutls 2>/dev/null); then
  # shellcheck disable=SC2086
  build "$work/client-tls" -DHAVE_GNUTLS=1 "$here/buffer.c" "$here/crypto-gnutls.c" $glib $gnutls \
    && tls=yes
fi

# Starts `reblock serve IMAGE ARGS...` and waits for its "serving" line; sets $port for
# TCP servers.
start_server() {
  local img=$1; shift
  : >"$work/server.log"
  "$reblock" serve "$img" --name export1 --control "$work/ctl" "$@" 2>"$work/server.log" &
  server_pid=$!
  for _ in $(seq 300); do
    if grep -q "serving" "$work/server.log"; then
      port=$(sed -n 's|.*nbd://127.0.0.1:\([0-9]*\)/.*|\1|p' "$work/server.log" | head -1)
      return 0
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$work/server.log" >&2
  return 1
}

stop_server() {
  kill -TERM "$server_pid" && wait "$server_pid"
  local rc=$?
  server_pid=""
  return $rc
}

# A formatted 50 MiB image (the size simple_test gives its integrity tests).
fresh_image() {
  rm -f "$work/disk.img"
  start_server "$work/disk.img" --create 50M --bopt-size 8M --tcp 127.0.0.1:0 && stop_server
}

passed=0
failed=0
skipped=0
# run_case NAME "SERVER ARGS" CLIENT ARGS...: serves a fresh image, runs the client.
run_case() {
  local name=$1 server_args=$2; shift 2
  if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " =~ " $name " ]]; then
    return
  fi
  local ok=yes
  fresh_image || ok=no
  # shellcheck disable=SC2086
  if [ $ok = yes ] && start_server "$work/disk.img" $server_args; then
    local args=("$@")
    args=("${args[@]//@PORT@/$port}")
    args=("${args[@]//@SOCK@/$work/nbd.sock}")
    "${args[@]}" >"$work/client.log" 2>&1 || ok=no
    stop_server || { echo "  the server did not stop cleanly" >&2; ok=no; }
  else
    ok=no
  fi
  if [ $ok = yes ]; then
    echo "PASS $name"
    passed=$((passed + 1))
  else
    echo "FAIL $name"
    sed 's/^/  | /' "$work/client.log" "$work/server.log" | tail -30
    failed=$((failed + 1))
  fi
}

skip() {
  echo "SKIP $1: $2"
  skipped=$((skipped + 1))
}

wanted=("$@")
c=$work/client
tcp="--tcp 127.0.0.1:0"
run_case cfg1 "$tcp" "$c" -N export1 127.0.0.1 @PORT@
run_case cfgnew "$tcp" "$c" -N export1 localhost @PORT@
run_case cfgsize "$tcp" "$c" -o -N export1 127.0.0.1 @PORT@
run_case cfgmulti "$tcp" "$c" -N export1 localhost @PORT@
run_case cfgmulti-readonly "$tcp --read-only" "$c" -N export1 localhost @PORT@
run_case write "$tcp" "$c" -N export1 -w localhost @PORT@
run_case flush "$tcp" "$c" -N export1 -w -f localhost @PORT@
run_case rowrite "$tcp --read-only" "$c" -N export1 -w -F localhost @PORT@
run_case unix "--unix $work/nbd.sock" "$c" -N export1 -u @SOCK@
run_case handshake "$tcp" "$c" -h -N export1 localhost @PORT@
run_case integrity "$tcp" "$c" -N export1 -i -t "$here/integrity-test.tr" localhost @PORT@
run_case integrityhuge "$tcp" "$c" -N export1 -i -t "$here/integrityhuge-test.tr" localhost @PORT@
if [ $tls = yes ]; then
  tlsargs="$tcp --tls require --tls-cert $certs/server-cert.pem --tls-key $certs/server-key.pem"
  ct=("$work/client-tls" -C "$certs/client-cert.pem" -K "$certs/client-key.pem" -A "$certs/ca-cert.pem")
  run_case tls "$tlsargs" "${ct[@]}" -N export1 -i -t "$here/integrity-test.tr" localhost @PORT@
  run_case tlshuge "$tlsargs" "${ct[@]}" -N export1 -i -t "$here/integrityhuge-test.tr" -H localhost 127.0.0.1 @PORT@
else
  skip tls "GnuTLS headers missing (libgnutls28-dev)"
  skip tlshuge "GnuTLS headers missing (libgnutls28-dev)"
fi
# Not applicable: dirconfig, tree, rotree, list, inetd (nbd-server's own configuration,
# tree files and inetd mode; their client side is cfg1/write/rowrite above), tlswrongcert
# (client certificates are not checked), nlconnect, connstatus, persist (the kernel client).
echo "nbd-tester-client: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
