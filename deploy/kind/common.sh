#!/usr/bin/env bash
# Shared by the kind runners (run-chaos.sh, run-eval.sh): error exit, required tools,
# port-forward bookkeeping (stopped between runs and on every exit), kubectl for the cluster and
# namespace, and waiting for a forwarded port. Sourced; expects KIND_CLUSTER, NAMESPACE and
# RESULTS_DIR to be set, and sets the traps itself.

die() { echo "$(basename "$0"): $*" >&2; exit 1; }

need() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' not found in PATH. $2"
}

need_kind_tools() {
  need docker  "Install Docker and start its daemon: https://docs.docker.com/get-docker/"
  need kind    "Install kind: https://kind.sigs.k8s.io/docs/user/quick-start/#installation"
  need kubectl "Install kubectl: https://kubernetes.io/docs/tasks/tools/"
  need npx     "Install Node.js 20 or newer, then run 'npm ci' in the repository."
  docker info >/dev/null 2>&1 || die "the Docker daemon is not reachable (is it running?)"
}

# Port-forward processes of the current run.
forward_pids=()
stop_forwards() {
  local pid
  for pid in ${forward_pids[@]+"${forward_pids[@]}"}; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in ${forward_pids[@]+"${forward_pids[@]}"}; do
    wait "$pid" 2>/dev/null || true
  done
  forward_pids=()
}
trap stop_forwards EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

kctl() { kubectl --context "kind-$KIND_CLUSTER" -n "$NAMESPACE" "$@"; }

# Wait until a local port accepts connections (bounded: 30 s).
wait_port() {
  local p="$1" i
  for i in $(seq 1 60); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then return 0; fi
    sleep 0.5
  done
  die "port-forward to 127.0.0.1:$p did not come up (see $RESULTS_DIR/port-forward-*.log)"
}

# Create the kind cluster if absent, build (unless SKIP_BUILD=1) and load the image, and apply the
# chaos overlay with its cluster key Secret (made once, kept after).
deploy_chaos_overlay() {
  if ! kind get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; then
    kind create cluster --name "$KIND_CLUSTER" --config deploy/kind/kind-config.yaml
  fi
  if [ "${SKIP_BUILD:-0}" != "1" ]; then
    echo "== image $IMAGE"
    docker build -f deploy/Dockerfile -t "$IMAGE" .
  fi
  kind load docker-image "$IMAGE" --name "$KIND_CLUSTER"
  echo "== deploy k8s/overlays/chaos"
  kubectl --context "kind-$KIND_CLUSTER" create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl --context "kind-$KIND_CLUSTER" apply -f -
  if ! kctl get secret deltaset-cluster-key >/dev/null 2>&1; then
    kctl create secret generic deltaset-cluster-key --from-literal=cluster.key="$(node -e 'process.stdout.write(require("node:crypto").randomBytes(32).toString("base64"))')"
  fi
  kubectl --context "kind-$KIND_CLUSTER" apply -k k8s/overlays/chaos
  mkdir -p "$RESULTS_DIR"
}
