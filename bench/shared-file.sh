#!/bin/bash
# Lease pairs on the lease stream (or over HTTP: MODE writ-lease) from N `writ serve` processes sharing
# one SQLite file (each on its own port, the clients split evenly between them, each client on its own
# key), driven by bench/loadgen:
# total pairs/s and the servers' CPU (user + system, all threads) per pair, after a 2 s warm-up.
# For before/after comparisons, run it alternately against two compiled trees (ROOT).
#
#   bash bench/shared-file.sh ROOT PROCESSES CLIENTS_PER_PROCESS SECONDS [writ-lease-stream|writ-lease]
set -euo pipefail
ROOT=$1; N=$2; C=$3; SECS=$4; MODE=${5:-writ-lease-stream}
case $MODE in writ-lease-stream|writ-lease) ;; *) echo "MODE is writ-lease-stream or writ-lease, not $MODE" >&2; exit 2 ;; esac
source "$(dirname "$0")/lib.sh"
bench_setup "$ROOT" shared-file
BASE=$PORT
PIDS=()
for i in $(seq 1 "$N"); do
  start_writ "$D/data" $((BASE + i)) "$D/log$i"
  PIDS+=("$WRIT_PID")
done
load() { # $1 seconds, $2 output prefix
  local L=()
  for i in $(seq 1 "$N"); do
    "$LOADGEN" -mode "$MODE" -url "http://127.0.0.1:$((BASE + i))" -clients "$C" -seconds "$1" -base $((1000 * i)) \
      -key "$HERE/fixtures/keys/seo-agent-7.jwk" -principal seo-agent-7 > "$2$i" &
    L+=($!)
  done
  wait "${L[@]}"
}
cpu() { local t=0; for p in "${PIDS[@]}"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
load 2 "$D/warm"
T0=$(cpu)
load "$SECS" "$D/run"
T1=$(cpu)
OPS=0; EACH=""
for i in $(seq 1 "$N"); do
  O=$(sed 's/.*"ops":\([0-9]*\).*/\1/' "$D/run$i"); E=$(sed 's/.*"errors":\([0-9]*\).*/\1/' "$D/run$i")
  [ "$E" = 0 ] || { echo "process $i: $E errors: $(cat "$D/run$i")" >&2; exit 1; }
  OPS=$((OPS + O)); EACH="$EACH${EACH:+ + }$((O / SECS))"
done
TICK_US=$((1000000 / $(getconf CLK_TCK)))
echo "$MODE processes=$N clients=$((N * C)) pairs/s=$((OPS / SECS)) ($EACH) cpu_us/pair=$(( (T1 - T0) * TICK_US / OPS )) load=$(cut -d' ' -f1 /proc/loadavg)"
