#!/bin/bash
# Instructions per operation of one `writ serve` build, counted by valgrind (callgrind): a cost figure
# that the machine's load does not move, for changes too small for rates or CPU time to show here.
#
#   [WARMUP=2000] [ROUNDS=3] [NODE_FLAGS=...] [KEEP=dir] [DATA_ROOT=/dev/shm] [SESSION=1|both] \
#     bash bench/instructions.sh ROOT writ-lease|writ-lease-stream|writ-decide N
#
# SESSION=1 (writ-lease, writ-decide): the load generator signs over a caller session (-session: opened
# before the counted window, then an HS256 request token per request) instead of an Ed25519 assertion
# per request. SESSION=both: the same server counts both in each round, one after the other, the order
# flipped every round (lines labelled MODE and MODE+session), after a warm-up of WARMUP operations each.
#
# The server runs under `valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes` (Node as
# shipped, plus NODE_FLAGS if given), with the example graph, no upstream and a decision TTL of an hour
# (the lease modes fetch their decision once, in the warm-up: the count of a pair holds no decision).
# Leases live 290 s and a request may take 20 (a pair can take seconds under valgrind on a loaded
# machine). One client (batches of one: with more, how many requests share a commit or a batch of signature
# checks would depend on timing). First WARMUP operations without instrumentation (the JIT warms up at
# ~20-30 operations/s), then instrumentation on, and ROUNDS rounds of: 20 unmeasured operations, the
# counters zeroed, exactly N operations, a dump. Each round prints instructions per operation: all
# threads, then without V8's optimizing compiler (compilation still going on after the warm-up is the
# part that moves between runs), then per thread: the main thread (event loop), the Ed25519 worker,
# the SQLite checkpointer (a tick every 100 ms and the WAL it copies: not a function of N alone) and V8's
# helper threads. Spent caller-assertion ids are purged at the wall clock's pace (single-use-store.ts),
# which valgrind slows 30-80x: so the warm-up's assertions live 10 s and are purged before the first
# round counts, and the rounds' live 295 s, so that none is purged while counted. KEEP=dir keeps the
# dumps (for callgrind_annotate). A run of 3 rounds of N=300 pairs
# took 8-12 minutes here on a loaded machine (Node starts in 60-100 s under valgrind; the warm-up runs at
# 5-30 operations/s, the counted operations at 3-5/s). bench/RESULTS.md ("Instructions per operation")
# has the figures, their spread and what NODE_FLAGS="--single-threaded --predictable-gc-schedule" changes.
set -euo pipefail
ROOT=$1; MODE=$2; N=$3
WARMUP=${WARMUP:-2000}; ROUNDS=${ROUNDS:-3}; NODE_FLAGS=${NODE_FLAGS:-}
source "$(dirname "$0")/lib.sh"
CLASSIFY="$HERE/bench/instructions-classes.awk"
bench_setup "$ROOT" instructions
T0=$(date +%s)
# shellcheck disable=SC2086
WRIT_DECISION_TTL_MS=3600000 WRIT_UPSTREAM_URL=http://127.0.0.1:9 valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes \
  --callgrind-out-file="$D/cg.%p" node $NODE_FLAGS dist/src/cli/main.js serve --data-dir "$D/data" --port $PORT --no-upstream \
  --graph graph/example.yaml > "$D/log" 2>&1 &
PID=$!
SERVERS+=("$PID")
# Under valgrind it takes a while to start: up to 10 minutes.
wait_writ $PORT "$D/log" 600 1 || exit 1
echo '{"action":"update_post","resource":"wp:post:1024","environment":"production","fields":["meta_description","title"]}' > "$D/req"
A="-mode $MODE -url http://127.0.0.1:$PORT -body $D/req -key $HERE/fixtures/keys/seo-agent-7.jwk -principal seo-agent-7 -clients 1 -lease-ttl-ms 290000 -timeout 20m"
case "${SESSION:-}" in
  '') VARIANTS=("") ;;
  1) VARIANTS=("-session") ;;
  both) VARIANTS=("" "-session") ;;
  *) echo "SESSION is 1 or both, not ${SESSION}" >&2; exit 1 ;;
esac
for V in "${VARIANTS[@]}"; do
  # shellcheck disable=SC2086
  $LOADGEN $A $V -ops "$WARMUP" -assertion-ttl 10 >/dev/null
done
# The warm-up's ids expire (10 s + the purge's 10 s of grace) and the first round's unmeasured
# operations purge them; the counted ones (295 s) expire only after the last round.
sleep 22
T1=$(date +%s)
callgrind_control -i on $PID >/dev/null 2>&1
TW=$(date +%s)
echo "# $MODE: started in $((T1 - T0)) s with the warm-up (load $(cut -d' ' -f1 /proc/loadavg)), node flags: ${NODE_FLAGS:-none}, session: ${SESSION:-no}"
# count ROUND V: one round of N operations with the load generator's flags V (a session or not).
count() {
  local round=$1 V=$2 LABEL=$MODE
  [ -z "$V" ] || LABEL="$MODE+session"
  rm -f "$D"/cg.$PID.*
  # shellcheck disable=SC2086
  R=$($LOADGEN $A $V -assertion-ttl 295 -ops "$N" -warmup-ops 20 -before-measure "callgrind_control -z $PID >/dev/null" -after-measure "callgrind_control -d $PID >/dev/null")
  SECS=$(echo "$R" | sed 's/.*"seconds":\([0-9.]*\).*/\1/')
  # One file a thread: cg.PID.1-01 (main), -02... Name each thread by what it ran.
  TOTAL=0; COMPILER=0; PARTS=""
  for f in "$D"/cg.$PID.*; do
    read -r IR COMP SODIUM CKPT < <(callgrind_annotate --threshold=100 "$f" 2>/dev/null | awk -f "$CLASSIFY" -v summary=1)
    TOTAL=$((TOTAL + IR)); COMPILER=$((COMPILER + COMP))
    T=${f##*-}
    if [ "$T" = 01 ]; then NAME=main; elif [ "$SODIUM" -gt $((IR / 2)) ]; then NAME=ed25519; elif [ "$CKPT" -gt 0 ]; then NAME=checkpointer; else NAME=v8-helpers; fi
    PARTS="$PARTS $NAME:$IR"
  done
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; for f in "$D"/cg.$PID.*; do cp "$f" "$KEEP/$LABEL-round$round-$(basename "$f")"; done; fi
  PER=$(echo "$PARTS" | tr ' ' '\n' | awk -F: -v n="$N" 'NF == 2 { s[$1] += $2 } END { for (k in s) printf " %s=%d", k, s[k] / n }')
  # The rounds' ids start to expire 295 s (+10 s of grace) after the first round began: from then on
  # their purge (single-use-store.ts) deletes rows in the counted window, and rounds stop being comparable.
  [ $(($(date +%s) - TW)) -lt 305 ] || echo "# warning: the first round's assertion ids have begun to expire: this round's count holds their purge"
  echo "$LABEL round=$round N=$N instructions/op=$((TOTAL / N)) without_v8_compiler=$(((TOTAL - COMPILER) / N)) per thread:$PER wall=${SECS%.*}s load=$(cut -d' ' -f1 /proc/loadavg)"
}
for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then ORDER=("${VARIANTS[@]}"); else ORDER=(); for ((i = ${#VARIANTS[@]} - 1; i >= 0; i--)); do ORDER+=("${VARIANTS[$i]}"); done; fi
  for V in "${ORDER[@]}"; do count "$round" "$V"; done
done
