#!/usr/bin/env bash
# Quickstart: build (or reuse) the local control plane, start it with the CRDs installed, apply the
# samples with kubectl, show them, and stop everything again (on exit, error or Ctrl-C).
#
# Usage: hack/quickstart.sh            (or: make quickstart)
# Env:   QUICKSTART_KEEP=1             keep the control plane running until Ctrl-C
#        CONNECTOR_MCP_CACHE           cache root for the control-plane binaries and tools
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/connector-mcp-quickstart.XXXXXX")"
KUBECONFIG_FILE="$WORK/kubeconfig"
DEVCLUSTER_PID=""
KUBECTL=""

log() { printf '\n\033[1m[quickstart] %s\033[0m\n' "$*" >&2; }

# cleanup stops the control plane (devcluster removes its own data) and the work directory.
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  # Output may go to a pipe that Ctrl-C already closed (make quickstart | tee): don't die on it
  # before the control plane is stopped.
  trap '' PIPE
  if [[ -n "$DEVCLUSTER_PID" ]] && kill -0 "$DEVCLUSTER_PID" 2>/dev/null; then
    log "Stopping the control plane"
    kill -TERM "$DEVCLUSTER_PID" 2>/dev/null || true
    wait "$DEVCLUSTER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
  exit "$rc"
}

# build_control_plane builds or reuses kube-apiserver, etcd and kubectl; sets KUBECTL.
build_control_plane() {
  log "Control plane binaries (built once from the Go module proxy, then cached)"
  local bin
  bin="$("$ROOT/hack/control-plane.sh")"
  export KUBEBUILDER_ASSETS="$bin"
  KUBECTL="$bin/kubectl"
}

# start_control_plane starts etcd + kube-apiserver with the CRDs and waits for the kubeconfig.
start_control_plane() {
  log "Building the devcluster launcher"
  (cd "$ROOT" && go build -o "$WORK/devcluster" ./hack/devcluster)
  log "Starting etcd and kube-apiserver, installing the CRDs"
  (cd "$ROOT" && exec "$WORK/devcluster" --write-kubeconfig "$KUBECONFIG_FILE") &
  DEVCLUSTER_PID=$!
  local _
  for _ in $(seq 1 120); do
    [[ -s "$KUBECONFIG_FILE" ]] && return 0
    kill -0 "$DEVCLUSTER_PID" 2>/dev/null || { log "The control plane failed to start"; return 1; }
    sleep 1
  done
  log "Timed out waiting for the control plane"
  return 1
}

kubectl() { "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# apply_samples applies config/samples with strict server-side field validation.
apply_samples() {
  log "Applying config/samples (strict field validation)"
  kubectl apply --validate=strict -k "$ROOT/config/samples"
}

# show shows both kinds as a user would see them.
show() {
  log "kubectl get mcpsp,sdep -o wide"
  kubectl get mcpsp,sdep -o wide
  log "A tag instead of a digest is refused by the apiserver:"
  kubectl apply --validate=strict -f - <<'YAML' || true
apiVersion: connectors.b10x.io/v1
kind: McpServiceProfile
metadata:
  name: tagged
spec:
  source:
    oci:
      ref: registry.example.com/platform/profiles/github:latest
YAML
}

main() {
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  build_control_plane
  start_control_plane
  apply_samples
  show
  if [[ "${QUICKSTART_KEEP:-}" == "1" ]]; then
    log "Control plane running; use: $KUBECTL --kubeconfig $KUBECONFIG_FILE ...  (Ctrl-C to stop)"
    wait "$DEVCLUSTER_PID"
  fi
  log "Done"
}

main "$@"
