#!/bin/bash
# Throughput and server CPU per operation of one `writ serve` build, driven by bench/loadgen: for
# before/after comparisons of a change, run alternately against two compiled trees (e.g. a
# `git archive <commit>` export with node_modules linked and `npx tsc -p tsconfig.json` run in it).
#
#   [DATA_ROOT=/dev/shm] bash bench/cpu-per-op.sh ROOT writ-lease|writ-lease-stream|writ-decide CLIENTS SECONDS
#
# Prints ops/s and the server process's CPU (user + system, all its threads) per operation, measured
# from /proc/<pid>/stat around the timed run (after a 2 s warm-up), split into user and system time,
# the main thread's CPU per operation (the event loop: the one thread that cannot use a second core), and the
# 1-minute load average. The data directory is under bench/tmp (this disk), or under DATA_ROOT.
set -euo pipefail
ROOT=$1; MODE=$2; CLIENTS=$3; SECS=$4
source "$(dirname "$0")/lib.sh"
bench_setup "$ROOT" cpu-per-op
start_writ "$D/data" $PORT "$D/log"
PID=$WRIT_PID
echo '{"action":"update_post","resource":"wp:post:1024","environment":"production","fields":["meta_description","title"]}' > "$D/req"
A="-mode $MODE -url http://127.0.0.1:$PORT -body $D/req -key $HERE/fixtures/keys/seo-agent-7.jwk -principal seo-agent-7 -clients $CLIENTS"
$LOADGEN $A -seconds 2 >/dev/null
read -r U0 S0 < <(awk '{print $14, $15}' /proc/$PID/stat)
M0=$(awk '{print $14 + $15}' /proc/$PID/task/$PID/stat)
R=$($LOADGEN $A -seconds "$SECS")
read -r U1 S1 < <(awk '{print $14, $15}' /proc/$PID/stat)
M1=$(awk '{print $14 + $15}' /proc/$PID/task/$PID/stat)
T0=$((U0 + S0)); T1=$((U1 + S1))
OPS=$(echo "$R" | sed 's/.*"ops":\([0-9]*\).*/\1/'); PS=$(echo "$R" | sed 's/.*"per_second":\([0-9.]*\).*/\1/')
TICK_US=$((1000000 / $(getconf CLK_TCK)))
echo "$MODE clients=$CLIENTS ops/s=${PS%.*} cpu_us/op=$(( (T1 - T0) * TICK_US / OPS )) (user $(( (U1 - U0) * TICK_US / OPS )), system $(( (S1 - S0) * TICK_US / OPS ))) main_thread_us/op=$(( (M1 - M0) * TICK_US / OPS )) load=$(cut -d' ' -f1 /proc/loadavg)"
