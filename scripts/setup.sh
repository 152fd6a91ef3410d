#!/usr/bin/env bash
# One-step set-up for a fresh clone: npm dependencies, the OPA CLI, the TypeScript build and the
# policy bundle. Safe to run again; each step is skipped when it is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

OPA_VERSION="v1.22.3"

say() { printf '[setup] %s\n' "$*" >&2; }

if ! command -v node >/dev/null 2>&1; then
  say "Node.js >= 20.12 is required and was not found on PATH. Install Node.js 20.12 or later (e.g. 'apt-get install nodejs npm')."
  exit 1
fi
# 20.12: the server hashes with crypto.hash (one call), which came in 20.12.
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 12) ? 0 : 1)'; then
  say "Node.js >= 20.12 is required; found $(node --version)."
  exit 1
fi

# npm dependencies: reinstall when the lock file is newer than the installed tree.
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  # `npm install` rather than `npm ci`: with this machine's registry settings the lock file cannot
  # record vite's Windows-only optional dependency, and `npm ci` refuses the lock for that alone.
  say "installing npm dependencies (npm install, from package-lock.json)"
  npm install --no-audit --no-fund >&2
fi

# The OPA CLI: PATH first, then tools/bin, else build the pinned version with Go.
bash scripts/ensure-opa.sh >/dev/null

say "compiling TypeScript"
npx tsc -p tsconfig.json

say "building the policy bundle"
node dist/src/cli/main.js policy build >&2

say "building the web console (esbuild)"
node scripts/build-console.mjs

# Debian's chromium, for the console's browser tests (playwright-core drives it; no browser download).
# Only those tests need it: without it the service still runs, and the tests fail saying what to install.
if ! bash scripts/ensure-chromium.sh >/dev/null; then
  say "WARNING: no chromium (see above): test/e2e/console-browser.test.ts will fail until it is installed"
fi
