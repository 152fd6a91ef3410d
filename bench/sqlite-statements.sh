#!/bin/bash
# The SQLite statements one lease pair runs in `writ serve` (the embedded default), counted natively:
#
#   [WARMUP=300] bash bench/sqlite-statements.sh ROOT writ-lease|writ-lease-stream|writ-decide N
#
# The server of the compiled tree ROOT runs with bench/sqlite-statements.cjs preloaded (the example graph,
# no upstream, a decision TTL of an hour, as bench/instructions.sh). One client: WARMUP operations, the
# counters reset, exactly N operations, then a table: how many times each statement ran on each
# connection (numbered in the order first used: in `writ serve` db1 is the write connection, db2 the read one)
# over the N operations, and the total. The checkpointer thread's statements are not counted.
set -euo pipefail
ROOT=$1; MODE=$2; N=$3
WARMUP=${WARMUP:-300}
source "$(dirname "$0")/lib.sh"
PRELOAD="$HERE/bench/sqlite-statements.cjs"
bench_setup "$ROOT" statements
SQLITE_STATEMENTS_OUT="$D/counts" WRIT_DECISION_TTL_MS=3600000 WRIT_UPSTREAM_URL=http://127.0.0.1:9 node --require "$PRELOAD" dist/src/cli/main.js serve \
  --data-dir "$D/data" --port $PORT --no-upstream --graph graph/example.yaml > "$D/log" 2>&1 &
PID=$!
SERVERS+=("$PID")
wait_writ $PORT "$D/log" || exit 1
echo '{"action":"update_post","resource":"wp:post:1024","environment":"production","fields":["meta_description","title"]}' > "$D/req"
A="-mode $MODE -url http://127.0.0.1:$PORT -body $D/req -key $HERE/fixtures/keys/seo-agent-7.jwk -principal seo-agent-7 -clients 1 -lease-ttl-ms 290000 -timeout 1m"
# shellcheck disable=SC2086
$LOADGEN $A -ops "$WARMUP" -assertion-ttl 295 >/dev/null
kill -USR2 $PID
sleep 0.5
# shellcheck disable=SC2086
$LOADGEN $A -ops "$N" -assertion-ttl 295 >/dev/null
rm -f "$D/counts"
kill -USR2 $PID
for _ in $(seq 50); do [ -s "$D/counts" ] && break; sleep 0.1; done
echo "# $MODE: SQLite statements over $N operations after $WARMUP (ROOT $ROOT)"
cat "$D/counts"
