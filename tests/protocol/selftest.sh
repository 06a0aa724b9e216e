#!/usr/bin/env bash
# Proves the validator: every file in samples/ passes, every file in samples-invalid/
# fails with the reason listed in samples-invalid/EXPECTED. Run after `npm ci`.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rc=0
out="$(node "$here/validate.mjs" "$here/samples")" || { echo "$out"; echo "selftest: samples/ did not all pass"; rc=1; }
out="$(node "$here/validate.mjs" "$here/samples-invalid")"
if [ $? -eq 0 ]; then echo "selftest: samples-invalid/ exited 0"; rc=1; fi
n=0
while IFS=$'\t' read -r file want; do
  case "$file" in ''|'#'*) continue ;; esac
  n=$((n + 1))
  line="$(grep -F "/samples-invalid/$file: " <<<"$out" || true)"
  if [[ "$line" != FAIL* ]] || [[ "$line" != *"$want"* ]]; then
    echo "selftest: $file: expected FAIL containing: $want"
    echo "          got: ${line:-<no line>}"
    rc=1
  fi
done <"$here/samples-invalid/EXPECTED"
total="$(ls "$here"/samples-invalid/*.sse | wc -l)"
[ "$n" -eq "$total" ] || { echo "selftest: EXPECTED lists $n files, samples-invalid/ has $total"; rc=1; }
last="$(tail -n1 <<<"$out")"
[ "$last" = "0 passed, $total failed" ] || { echo "selftest: last line was '$last'"; rc=1; }
[ $rc -eq 0 ] && echo "selftest: ok ($(ls "$here"/samples/*.sse | wc -l) valid passed, $total invalid failed as expected)"
exit $rc
