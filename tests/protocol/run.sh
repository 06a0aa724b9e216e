#!/usr/bin/env bash
# CI entry point: install the pinned validator packages, run the validator's self-test, then
# validate every *.agui.sse / *.aisdk.sse file in the given directory.
#   tests/protocol/run.sh <dir-with-recorded-streams>
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -ne 1 ]; then
  echo "usage: $0 <dir>" >&2
  exit 2
fi
dir="$(cd "$1" && pwd)"
(cd "$here" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
# The validator proves itself first: every sample passes, every broken sample fails as listed.
if ! selftest="$("$here/selftest.sh")"; then
  echo "$selftest"
  exit 1
fi
echo "${selftest##*$'\n'}"
# The request fixtures the server's tests post are what the pinned client sends.
node "$here/requests.mjs" "$here/../../fixtures/ui" "$dir"
exec node "$here/validate.mjs" "$dir"
