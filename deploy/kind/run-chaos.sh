#!/usr/bin/env bash
# Fault-injection experiments on a kind cluster with real Toxiproxy sidecars.
#
# Builds the image, loads it into kind, deploys k8s/overlays/chaos, port-forwards every pod's
# gRPC port (7070) and Toxiproxy API (8474) to local ports, then runs each scenario with
# `deltaset chaos run <scenario> --external`, writing results to docs/results/chaos-kind/.
# Port-forwards are opened afresh for every scenario (a forward dies with its pod) and are
# always stopped on exit.
#
# Usage (from anywhere):  deploy/kind/run-chaos.sh [scenario ...]
# Environment:
#   KIND_CLUSTER   kind cluster name (default: deltaset; created from kind-config.yaml if absent)
#   NAMESPACE      namespace of the chaos overlay (default: deltaset)
#   IMAGE          image tag the manifests use (default: deltaset:dev)
#   SCENARIOS      space-separated scenarios when none are given as arguments
#   BASE_PORT      first local port for port-forwards (default: 17070)
#   SKIP_BUILD=1   reuse an image already loaded into kind
#   RESULTS_DIR    where results and port-forward logs go (default: docs/results/chaos-kind)
#   EXTRA_ARGS     extra arguments passed to every `deltaset chaos run`
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"

KIND_CLUSTER="${KIND_CLUSTER:-deltaset}"
NAMESPACE="${NAMESPACE:-deltaset}"
IMAGE="${IMAGE:-deltaset:dev}"
BASE_PORT="${BASE_PORT:-17070}"
RESULTS_DIR="${RESULTS_DIR:-docs/results/chaos-kind}"
DEFAULT_SCENARIOS="partition-one partition-halves latency-jitter packet-slicer reset-peer bandwidth-limit"

# shellcheck source=deploy/kind/common.sh
source "$repo_root/deploy/kind/common.sh"
need_kind_tools

if [ "$#" -gt 0 ]; then
  scenarios=("$@")
else
  read -r -a scenarios <<< "${SCENARIOS:-$DEFAULT_SCENARIOS}"
fi
[ "${#scenarios[@]}" -gt 0 ] || die "no scenarios given"

# Forward pod i's gRPC port to BASE_PORT + 2i and its Toxiproxy API to BASE_PORT + 2i + 1, on
# 127.0.0.1 only. Sets node_list and proxy_list (comma-separated).
start_forwards() {
  local pods pod port grpc_port api_port nodes="" proxies=""
  kctl rollout status statefulset/deltaset --timeout=300s
  pods="$(kctl get pods -l app.kubernetes.io/name=deltaset \
    -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)"
  [ -n "$pods" ] || die "no deltaset pods found in namespace $NAMESPACE"
  port="$BASE_PORT"
  for pod in $pods; do
    grpc_port="$port"
    api_port=$((port + 1))
    port=$((port + 2))
    # A plain command, not the kctl function: in the background a function runs in a subshell,
    # and $! would be that subshell's pid instead of kubectl's.
    kubectl --context "kind-$KIND_CLUSTER" -n "$NAMESPACE" port-forward --address 127.0.0.1 \
      "pod/$pod" "$grpc_port:7070" "$api_port:8474" >"$RESULTS_DIR/port-forward-$pod.log" 2>&1 &
    forward_pids+=("$!")
    wait_port "$grpc_port"
    wait_port "$api_port"
    nodes="${nodes:+$nodes,}127.0.0.1:$grpc_port"
    proxies="${proxies:+$proxies,}http://127.0.0.1:$api_port"
  done
  node_list="$nodes"
  proxy_list="$proxies"
}

echo "== kind cluster '$KIND_CLUSTER'"
deploy_chaos_overlay

failed=()
for scenario in "${scenarios[@]}"; do
  echo "== scenario $scenario"
  start_forwards
  echo "   nodes     $node_list"
  echo "   toxiproxy $proxy_list"
  # EXTRA_ARGS is split into words on purpose.
  # shellcheck disable=SC2086
  if npx deltaset chaos run "$scenario" --external \
      --nodes "$node_list" --toxiproxy "$proxy_list" \
      --out "$RESULTS_DIR" ${EXTRA_ARGS:-}; then
    echo "== scenario $scenario: done"
  else
    echo "== scenario $scenario: FAILED" >&2
    failed+=("$scenario")
  fi
  stop_forwards
done

echo "== results in $RESULTS_DIR"
if [ "${#failed[@]}" -gt 0 ]; then
  die "failed scenarios: ${failed[*]}"
fi
