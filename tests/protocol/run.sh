#!/usr/bin/env bash
# CI entry point: install the pinned validator packages, then validate every
# *.agui.sse / *.aisdk.sse file in the given directory.
#   tests/protocol/run.sh <dir-with-recorded-streams>
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -ne 1 ]; then
  echo "usage: $0 <dir>" >&2
  exit 2
fi
dir="$(cd "$1" && pwd)"
(cd "$here" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
exec node "$here/validate.mjs" "$dir"
