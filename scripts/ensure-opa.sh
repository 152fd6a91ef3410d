#!/usr/bin/env bash
# Prints the path of an `opa` binary, installing the pinned version into tools/bin if needed.
set -euo pipefail
cd "$(dirname "$0")/.."
OPA_VERSION="v1.22.3"
if [ -n "${WRIT_OPA:-}" ] && [ -x "${WRIT_OPA}" ]; then echo "$WRIT_OPA"; exit 0; fi
if command -v opa >/dev/null 2>&1; then command -v opa; exit 0; fi
if [ -x tools/bin/opa ]; then echo "$PWD/tools/bin/opa"; exit 0; fi
if ! command -v go >/dev/null 2>&1; then
  echo "[setup] The OPA CLI is needed to compile policies and neither 'opa' nor 'go' is on PATH." >&2
  echo "[setup] Install Go >= 1.24 (https://go.dev/dl, or 'apt-get install golang') and run this again," >&2
  echo "[setup] or put an opa ${OPA_VERSION} binary on PATH (or set WRIT_OPA=/path/to/opa)." >&2
  exit 1
fi
echo "[setup] installing opa ${OPA_VERSION} with 'go install' into tools/bin (takes a few minutes once)" >&2
mkdir -p tools/bin
if ! GOBIN="$PWD/tools/bin" go install "github.com/open-policy-agent/opa@${OPA_VERSION}" >&2; then
  echo "[setup] 'go install github.com/open-policy-agent/opa@${OPA_VERSION}' failed (see above)." >&2
  echo "[setup] Put an opa ${OPA_VERSION} binary on PATH or set WRIT_OPA=/path/to/opa, then run this again." >&2
  exit 1
fi
echo "$PWD/tools/bin/opa"
