#!/usr/bin/env bash
# The test command (`npm test`): type check, generated-code drift check, then every test under
# test/ with node's test runner. Node 20's runner takes no glob, so the files are listed here.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== type check"
node_modules/.bin/tsc -p .
echo "== generated code"
bash scripts/gen-check.sh
echo "== tests"
mapfile -t files < <(find test -name '*.test.ts' -not -path 'test/bench/*' | sort)
if [ "${#files[@]}" -eq 0 ]; then echo "no test files found" >&2; exit 1; fi
tap=$(mktemp)
trap 'rm -f "$tap"' EXIT
set +e
# Through the module loader the node itself runs on (bin/ts-loader.mjs), so tests run the same code.
node --import ./bin/register-ts.mjs --test --test-concurrency="${TEST_CONCURRENCY:-2}" \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$tap" \
  "${files[@]}"
code=$?
set -e
# A plain closing line as well as the runner's own summary.
pass=$(grep -E '^# pass [0-9]+' "$tap" | tail -1 | awk '{print $3}')
fail=$(grep -E '^# fail [0-9]+' "$tap" | tail -1 | awk '{print $3}')
echo "${pass:-0} passed, ${fail:-0} failed"
exit "$code"
