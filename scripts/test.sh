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
rego_out="$("$OPA" test --v1-compatible policies/ 2>&1)" || { echo "$rego_out"; exit 1; }
echo "$rego_out" | tail -n 2
rego_passed="$(echo "$rego_out" | sed -n 's/^PASS: \([0-9]*\)\/.*/\1/p')"
echo "== tsc (sources and tests)"
npx tsc -p tsconfig.test.json
npx tsc -p console/tsconfig.json
echo "== OpenAPI lint (spectral, .spectral.yaml; warnings fail)"
mkdir -p build
node dist/scripts/openapi-document.js > build/openapi.json
npx spectral lint --fail-severity=warn build/openapi.json
echo "== vitest"
status=0
npx vitest run --reporter=default --reporter=json --outputFile.json=build/vitest-results.json || status=$?
# One plain closing line for CI: the Rego tests and the vitest tests together.
node -e '
  const fs = require("fs");
  const v = JSON.parse(fs.readFileSync("build/vitest-results.json", "utf8"));
  const rego = Number(process.argv[1]) || 0;
  // A file whose set-up (beforeAll) failed reports its tests as skipped, not failed: count such files too.
  const brokenFiles = v.testResults.filter((f) => f.status === "failed" && f.assertionResults.every((a) => a.status !== "failed")).length;
  const failed = v.numFailedTests + brokenFiles + (v.numTotalTests === 0 && brokenFiles === 0 ? 1 : 0);
  console.log(`tests: ${v.numPassedTests + rego} passed, ${failed} failed, ${v.numPendingTests + v.numTodoTests} skipped` + (brokenFiles ? ` (${brokenFiles} test file(s) failed outside their tests: set-up, import or tear-down)` : ""));
' "$rego_passed"
exit "$status"
