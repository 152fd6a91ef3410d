#!/bin/bash
# Lease pairs on the lease stream from N `writ serve` processes sharing one SQLite file (each on its own
# port, the clients split evenly between them, each client on its own key), driven by bench/loadgen:
# total pairs/s and the servers' CPU (user + system, all threads) per pair, after a 2 s warm-up.
# For before/after comparisons, run it alternately against two compiled trees (ROOT).
#
#   bash bench/shared-file.sh ROOT PROCESSES CLIENTS_PER_PROCESS SECONDS
set -euo pipefail
ROOT=$1; N=$2; C=$3; SECS=$4
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$HERE/bench/tmp"
LOADGEN="$HERE/bench/tmp/loadgen"
[ -x "$LOADGEN" ] || (cd "$HERE/bench/loadgen" && /usr/local/go/bin/go build -o "$LOADGEN" .)
cd "$ROOT"
D=$(mktemp -d "$HERE/bench/tmp/shared-file-XXXX")
BASE=$((20000 + RANDOM % 10000))
PIDS=()
for i in $(seq 1 "$N"); do
  WRIT_UPSTREAM_URL=http://127.0.0.1:9 node dist/src/cli/main.js serve --data-dir "$D/data" --port $((BASE + i)) --no-upstream --graph graph/example.yaml > "$D/log$i" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 150); do curl -s "localhost:$((BASE + i))/healthz" >/dev/null && break; sleep 0.2; done
done
load() { # $1 seconds, $2 output prefix
  local L=()
  for i in $(seq 1 "$N"); do
    "$LOADGEN" -mode writ-lease-stream -url "http://127.0.0.1:$((BASE + i))" -clients "$C" -seconds "$1" -base $((1000 * i)) \
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
for p in "${PIDS[@]}"; do kill -TERM "$p"; done
wait "${PIDS[@]}" 2>/dev/null || true
TICK_US=$((1000000 / $(getconf CLK_TCK)))
echo "processes=$N clients=$((N * C)) pairs/s=$((OPS / SECS)) ($EACH) cpu_us/pair=$(( (T1 - T0) * TICK_US / OPS )) load=$(cut -d' ' -f1 /proc/loadavg)"
rm -rf "$D"
