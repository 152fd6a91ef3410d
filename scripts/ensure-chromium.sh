#!/usr/bin/env bash
# Prints the path of Debian's chromium (the console's browser tests drive it with playwright-core),
# installing it with apt-get when missing. Never downloads a browser build of its own.
set -euo pipefail
CHROMIUM="${WRIT_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then echo "$CHROMIUM"; exit 0; fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "[setup] The console's browser tests need Debian's chromium at $CHROMIUM and it is missing." >&2
  echo "[setup] Install it as root: 'apt-get update && apt-get install -y chromium' (or set WRIT_CHROMIUM=/path/to/chromium)." >&2
  exit 1
fi
echo "[setup] installing chromium with apt-get (once)" >&2
if ! { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >&2; }; then
  echo "[setup] 'apt-get install -y chromium' failed (see above). Install Debian's chromium package, or set WRIT_CHROMIUM=/path/to/chromium." >&2
  exit 1
fi
if [ ! -x "$CHROMIUM" ]; then echo "[setup] chromium was installed but $CHROMIUM is not there; set WRIT_CHROMIUM." >&2; exit 1; fi
echo "$CHROMIUM"
