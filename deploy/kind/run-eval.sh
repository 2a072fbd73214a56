#!/usr/bin/env bash
# The evaluation sweep, reduced, on a kind cluster with real Toxiproxy sidecars.
#
# Deploys k8s/overlays/chaos (as run-chaos.sh does) and, for each sync mode, sets the mode's node
# environment on the StatefulSet (`deltaset chaos eval-env MODE`), waits for the rollout,
# port-forwards every pod's gRPC port (7070), Toxiproxy API (8474) and metrics port (9464) to
# 127.0.0.1, and runs one `deltaset chaos eval-cell` per (latency, loss) level: the same cell code
# as the local sweep (`npm run eval`, services/chaos/eval/), which is tested there. One JSON per
# cell goes to RESULTS_DIR. CPU per node is not measured here (no access to the pods' processes).
#
# Usage (from anywhere):  deploy/kind/run-eval.sh
# Environment:
#   KIND_CLUSTER   kind cluster name (default: deltaset; created if absent)
#   NAMESPACE      namespace of the chaos overlay (default: deltaset)
#   IMAGE          image tag the manifests use (default: deltaset:dev)
#   MODES          sync modes (default: "full-state alg2 alg2+bp+rr alg2+bp+rr+push")
#   LATENCIES      one-way link latencies in ms, with jitter as L:J (default: "0:0 50:10")
#   LOSSES         loss-window shares of link time (default: "0 0.1")
#   ROUNDS         write-then-settle rounds per cell (default: 2)
#   BASE_PORT      first local port for port-forwards (default: 18070)
#   SKIP_BUILD=1   reuse an image already loaded into kind
#   RESULTS_DIR    where results and port-forward logs go (default: docs/results/eval-kind)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"

KIND_CLUSTER="${KIND_CLUSTER:-deltaset}"
NAMESPACE="${NAMESPACE:-deltaset}"
IMAGE="${IMAGE:-deltaset:dev}"
BASE_PORT="${BASE_PORT:-18070}"
RESULTS_DIR="${RESULTS_DIR:-docs/results/eval-kind}"
read -r -a modes <<< "${MODES:-full-state alg2 alg2+bp+rr alg2+bp+rr+push}"
read -r -a latencies <<< "${LATENCIES:-0:0 50:10}"
read -r -a losses <<< "${LOSSES:-0 0.1}"
ROUNDS="${ROUNDS:-2}"

# shellcheck source=deploy/kind/common.sh
source "$repo_root/deploy/kind/common.sh"
need_kind_tools

# Pod i: gRPC on BASE_PORT + 3i, Toxiproxy API on + 1, metrics on + 2 (127.0.0.1 only).
start_forwards() {
  local pods pod port nodes="" proxies="" metrics=""
  kctl rollout status statefulset/deltaset --timeout=300s
  pods="$(kctl get pods -l app.kubernetes.io/name=deltaset -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)"
  [ -n "$pods" ] || die "no deltaset pods found in namespace $NAMESPACE"
  port="$BASE_PORT"
  for pod in $pods; do
    kubectl --context "kind-$KIND_CLUSTER" -n "$NAMESPACE" port-forward --address 127.0.0.1 \
      "pod/$pod" "$port:7070" "$((port + 1)):8474" "$((port + 2)):9464" >"$RESULTS_DIR/port-forward-$pod.log" 2>&1 &
    forward_pids+=("$!")
    wait_port "$port"; wait_port "$((port + 1))"; wait_port "$((port + 2))"
    nodes="${nodes:+$nodes,}127.0.0.1:$port"
    proxies="${proxies:+$proxies,}http://127.0.0.1:$((port + 1))"
    metrics="${metrics:+$metrics,}127.0.0.1:$((port + 2))"
    port=$((port + 3))
  done
  node_list="$nodes"; proxy_list="$proxies"; metrics_list="$metrics"
}

echo "== kind cluster '$KIND_CLUSTER'"
deploy_chaos_overlay

# Membership probes must wait longer than the slowest round trip the cells will set.
max_lat=0; max_jit=0
for lat in "${latencies[@]}"; do
  if [ "${lat%%:*}" -ge "$max_lat" ]; then max_lat="${lat%%:*}"; max_jit="${lat##*:}"; fi
done

failed=()
seed=1
for mode in "${modes[@]}"; do
  echo "== mode $mode"
  # The mode's settings, a 100 ms gossip period (the physical limit assumes it), membership timing
  # for the largest latency, and nothing else changed.
  mapfile -t env_pairs < <(npx deltaset chaos eval-env "$mode" --latency-ms "$max_lat" --jitter-ms "$max_jit")
  kctl set env statefulset/deltaset DELTASET_GOSSIP_INTERVAL_MS=100 DELTASET_GOSSIP_PUSH_LOCAL_MS=0 DELTASET_GOSSIP_CHOOSE=delta+periodic-state "${env_pairs[@]}"
  start_forwards
  # The first cell after the rollout warms the fresh pods up first (unmeasured; see
  # services/chaos/eval/warm-up.ts), as the local sweep does for each new cluster.
  warm_up_ms=5000
  for lat in "${latencies[@]}"; do
    for loss in "${losses[@]}"; do
      out="$RESULTS_DIR/cell-$mode-lat${lat%%:*}-loss$loss.json"
      echo "   latency ${lat%%:*}±${lat##*:} ms, loss share $loss -> $out"
      if ! npx deltaset chaos eval-cell --nodes-addrs "$node_list" --toxiproxy "$proxy_list" --metrics "$metrics_list" \
          --mode "$mode" --latency-ms "${lat%%:*}" --jitter-ms "${lat##*:}" --loss-share "$loss" \
          --rounds "$ROUNDS" --gossip-interval-ms 100 --seed "$seed" --warm-up-ms "$warm_up_ms" --out "$out"; then
        failed+=("$mode/$lat/$loss")
      fi
      seed=$((seed + 1))
      warm_up_ms=0
    done
  done
  stop_forwards
done

echo "== results in $RESULTS_DIR"
[ "${#failed[@]}" -eq 0 ] || die "cells that failed or lost writes: ${failed[*]}"
