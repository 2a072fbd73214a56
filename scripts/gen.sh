#!/usr/bin/env bash
# Generate the TypeScript protobuf/grpc-js code in services/gen/ from proto/ with ts-proto.
# Usage: scripts/gen.sh [OUTDIR]   (default services/gen)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-services/gen}"
mkdir -p "$out"
rm -rf "$out"/deltaset
bin=node_modules/.bin
"$bin/protoc" \
  --plugin=protoc-gen-ts_proto="$bin/protoc-gen-ts_proto" \
  --ts_proto_out="$out" \
  --ts_proto_opt=outputServices=grpc-js,esModuleInterop=true,env=node,importSuffix=.js,forceLong=bigint,useOptionals=messages \
  -I proto \
  $(find proto -name '*.proto' | sort)
