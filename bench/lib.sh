# Shared by the shell benchmarks (source it): HERE (the repository), LOADGEN (bench/loadgen, built
# on each use); bench_setup ROOT NAME: cd to the compiled tree ROOT, a fresh directory D for this run
# (under DATA_ROOT if set, else bench/tmp) and a random PORT; start_writ DATA_DIR PORT LOG: a `writ serve`
# of the current directory's build (the example graph, no upstream) in the background, returning once it
# answers /healthz, its pid in WRIT_PID; wait_writ PORT LOG [TRIES [SECONDS]]: the wait alone, for a
# script that starts its server itself (under valgrind, with a preload; add its pid to SERVERS): asks
# /healthz TRIES times SECONDS apart (150 x 0.2 s by default), else says so with the end of LOG and
# returns 1. On exit, however the script ends, the servers it started are stopped and D is removed.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$HERE/bench/tmp"
LOADGEN="$HERE/bench/tmp/loadgen"
# Built every time (Go's build cache makes an unchanged build take about a second at most), so a binary left from older sources never runs.
(cd "$HERE/bench/loadgen" && /usr/local/go/bin/go build -o "$LOADGEN" .)
SERVERS=()
start_writ() {
  WRIT_UPSTREAM_URL=http://127.0.0.1:9 node dist/src/cli/main.js serve --data-dir "$1" --port "$2" --no-upstream --graph graph/example.yaml > "$3" 2>&1 &
  WRIT_PID=$!
  SERVERS+=("$WRIT_PID")
  wait_writ "$2" "$3"
}
wait_writ() {
  for _ in $(seq "${3:-150}"); do curl -s "localhost:$1/healthz" >/dev/null && return 0; sleep "${4:-0.2}"; done
  echo "writ serve on port $1 did not answer: $(tail -n 40 "$2")" >&2
  return 1
}
bench_cleanup() {
  for p in "${SERVERS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${SERVERS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$D"
}
bench_setup() {
  cd "$1"
  D=$(mktemp -d "${DATA_ROOT:-$HERE/bench/tmp}/$2-XXXX")
  PORT=$((20000 + RANDOM % 10000))
  trap bench_cleanup EXIT
}
