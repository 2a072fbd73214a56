#!/usr/bin/env bash
# Fail when services/gen/ differs from what `npm run gen` would produce now.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash scripts/gen.sh "$tmp/gen"
if ! diff -r "$tmp/gen" services/gen >"$tmp/diff"; then
  echo "services/gen is stale: run 'npm run gen' and commit the result." >&2
  head -40 "$tmp/diff" >&2
  exit 1
fi
echo "generated code is up to date"
