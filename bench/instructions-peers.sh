#!/bin/bash
# The lease pair's peers counted as bench/instructions.sh counts Writ: instructions per acquire +
# release pair of a private redis-server (appendonly, appendfsync always) or a private PostgreSQL
# cluster (initdb in a temporary directory, synchronous_commit on, run as the postgres user; never the
# shared server), under valgrind's callgrind, driven by bench/loadgen with one client (pg-lease: one
# connection), after WARMUP unmeasured pairs, ROUNDS rounds of exactly N.
#
#   [WARMUP=2000] [ROUNDS=3] bash bench/instructions-peers.sh redis|postgres N
#
# Redis: every thread of the one process, zeroed before the round and dumped after it (callgrind_control).
# PostgreSQL: the client's backend alone (with synchronous_commit on it writes and flushes its own WAL;
# the WAL writer, checkpointer and background writer are not counted). callgrind_control cannot reach a
# process that valgrind's process forked (no vgdb for it), so the backend is counted whole, from its exit
# dump: a connection making WARMUP + N pairs against one making WARMUP pairs, the difference over N.
set -euo pipefail
PEER=$1; N=$2
WARMUP=${WARMUP:-2000}; ROUNDS=${ROUNDS:-3}
source "$(dirname "$0")/lib.sh"
D=$(mktemp -d /tmp/instructions-peer-XXXX)
chmod 755 "$D"
PORT=$((20000 + RANDOM % 10000))
PIDS=()
cleanup() {
  [ -f "$D/pg/postmaster.pid" ] && kill -TERM "$(head -1 "$D/pg/postmaster.pid")" 2>/dev/null || true
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$D"
}
trap cleanup EXIT
# Sums the `totals:` of the dumps (one file a process) that callgrind_control -d wrote since the last round.
sum_dumps() { cat "$D"/cg.*.[0-9]* 2>/dev/null | awk '/^totals:/ { s += $2 } END { print s + 0 }'; }
case $PEER in
  redis)
    valgrind --tool=callgrind --callgrind-out-file="$D/cg.%p" redis-server --port $PORT --bind 127.0.0.1 --dir "$D" \
      --appendonly yes --appendfsync always --save '' --daemonize no > "$D/log" 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 120); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 1; done
    A="-mode redis-lease -addr 127.0.0.1:$PORT -clients 1"
    LIST="echo ${PIDS[0]}"
    ;;
  postgres)
    BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    chown postgres "$D"
    runuser -u postgres -- "$BIN/initdb" -D "$D/pg" -A trust -U postgres > "$D/initdb.log"
    runuser -u postgres -- valgrind --tool=callgrind --callgrind-out-file="$D/cg.%p" "$BIN/postgres" -D "$D/pg" -p $PORT \
      -k "$D" -c listen_addresses=127.0.0.1 -c synchronous_commit=on -c fsync=on > "$D/log" 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 300); do "$BIN/pg_isready" -q -h 127.0.0.1 -p $PORT && break; sleep 1; done
    A="-mode pg-lease -dsn postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable -clients 1"
    ;;
  *) echo "unknown peer $PEER" >&2; exit 1 ;;
esac
if [ "$PEER" = postgres ]; then
  # backend_count PAIRS: the instructions of the backend of one loadgen connection that made PAIRS pairs.
  backend_count() {
    local before after f
    before=$(ls "$D"/cg.* 2>/dev/null | sort)
    # shellcheck disable=SC2086
    $LOADGEN $A -ops "$1" >/dev/null
    for _ in $(seq 60); do
      after=$(comm -13 <(echo "$before") <(ls "$D"/cg.* | sort))
      [ -n "$after" ] && grep -q "PostgresMain" $after && break
      sleep 1
    done
    # Other processes may exit meanwhile (an autovacuum worker): the backend is the one that ran the pairs' statements.
    for f in $(grep -l "PostgresMain" $after); do awk '/^totals:/ { print $2 }' "$f"; done | sort -n | tail -1
  }
  backend_count "$WARMUP" >/dev/null
  echo "# $PEER: warm-up of $WARMUP pairs done (load $(cut -d' ' -f1 /proc/loadavg))"
  for round in $(seq "$ROUNDS"); do
    T0=$(date +%s)
    BASE=$(backend_count "$WARMUP"); MORE=$(backend_count $((WARMUP + N)))
    echo "$PEER round=$round N=$N instructions/pair=$(((MORE - BASE) / N)) (the client's backend: $BASE for $WARMUP pairs with its start, $MORE for $((WARMUP + N))) wall=$(($(date +%s) - T0))s load=$(cut -d' ' -f1 /proc/loadavg)"
  done
  exit 0
fi
# callgrind_control OPTION on the peer's process.
cat > "$D/each.sh" <<EOF
for p in \$($LIST); do timeout 10 callgrind_control "\$1" "\$p" >/dev/null 2>&1 || echo "process \$p did not answer \$1" >&2; done
EOF
# shellcheck disable=SC2086
$LOADGEN $A -ops "$WARMUP" >/dev/null
echo "# $PEER: warm-up of $WARMUP pairs done (load $(cut -d' ' -f1 /proc/loadavg))"
for round in $(seq "$ROUNDS"); do
  rm -f "$D"/cg.*.[0-9]*
  # shellcheck disable=SC2086
  R=$($LOADGEN $A -ops "$N" -warmup-ops 20 -before-measure "bash $D/each.sh -z" -after-measure "bash $D/each.sh -d")
  SECS=$(echo "$R" | sed 's/.*"seconds":\([0-9.]*\).*/\1/')
  TOTAL=$(sum_dumps)
  BIGGEST=$(for f in "$D"/cg.*.[0-9]*; do awk '/^totals:/ { print $2 }' "$f"; done | sort -n | tail -1)
  echo "$PEER round=$round N=$N instructions/pair=$((TOTAL / N)) (the busiest process: $((BIGGEST / N)); $(ls "$D"/cg.*.[0-9]* | wc -l) processes dumped) wall=${SECS%.*}s load=$(cut -d' ' -f1 /proc/loadavg)"
done
