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
exec node --import tsx --test --test-concurrency="${TEST_CONCURRENCY:-2}" --test-reporter=spec "${files[@]}"
