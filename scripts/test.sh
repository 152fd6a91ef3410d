#!/usr/bin/env bash
# The whole test suite: Rego format, strict check and unit tests, the TypeScript type check, vitest.
set -euo pipefail
cd "$(dirname "$0")/.."
OPA="$(bash scripts/ensure-opa.sh)"

echo "== opa fmt (fails on unformatted Rego)"
unformatted="$("$OPA" fmt --list --v1-compatible policies/ || true)"
if [ -n "$unformatted" ]; then
  echo "Rego files need 'opa fmt -w':"; echo "$unformatted"; exit 1
fi
echo "== opa check --strict"
"$OPA" check --strict --v1-compatible policies/
echo "== opa test"
"$OPA" test --v1-compatible policies/ -v --count=1 2>&1 | tail -n 5
"$OPA" test --v1-compatible policies/ >/dev/null
echo "== tsc (sources and tests)"
npx tsc -p tsconfig.test.json
echo "== vitest"
npx vitest run
