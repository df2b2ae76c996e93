#!/usr/bin/env bash
# Builds kube-apiserver, kubectl and etcd from source through the Go module proxy and caches the
# binaries by version outside the repository, so a second run is instant. No prebuilt binary is
# downloaded (setup-envtest's archives are not reachable from CI).
#
# Usage: hack/control-plane.sh [EXTRA...]  # build (or reuse) and print the bin directory on stdout
#        EXTRA: optional extra commands from k8s.io/kubernetes/cmd, e.g. kube-controller-manager
# Env:   CONNECTOR_MCP_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/connector-mcp)
#        KUBE_VERSION         k8s.io/kubernetes version (default v1.37.2)
#        ETCD_VERSION         etcd server version (default v3.7.3)
#
# The defaults are mirrored by internal/devcluster (KubeVersion, EtcdVersion); a unit test there
# keeps them equal. Progress goes to stderr; only the bin directory is printed on stdout, so
# KUBEBUILDER_ASSETS="$(hack/control-plane.sh)" works.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
CACHE_ROOT="${CONNECTOR_MCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/connector-mcp}"
BIN_DIR="$CACHE_ROOT/control-plane/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"
STAGING_VERSION="v0.${KUBE_VERSION#v1.}"
KUBE_CMDS=(kube-apiserver kubectl "$@")

log() { printf '[control-plane] %s\n' "$*" >&2; }

# have_all reports whether every wanted binary is already cached.
have_all() {
  local c
  for c in etcd "${KUBE_CMDS[@]}"; do
    [[ -x "$BIN_DIR/$c" ]] || return 1
  done
}

if have_all; then
  log "Using cached binaries in $BIN_DIR"
  echo "$BIN_DIR"
  exit 0
fi

mkdir -p "$BIN_DIR"
# One build at a time per cache dir: a second caller waits, then reuses the first one's output.
exec 9>"$BIN_DIR.lock"
if ! flock -n 9; then
  log "Another build of $BIN_DIR is running; waiting for it"
  flock 9
fi
if have_all; then
  log "Using cached binaries in $BIN_DIR"
  echo "$BIN_DIR"
  exit 0
fi

WORK="$(mktemp -d)"
export GOFLAGS="-mod=mod"
export CGO_ENABLED=0
export GOTOOLCHAIN=local

# Heartbeat so a cold build (~15 minutes on 2 cores) visibly makes progress. Its output goes to
# stderr so that a caller's $(...) does not wait for it, and on TERM it ends its sleep too, so no
# stray process keeps a caller's pipe open after the build.
start=$(date +%s)
(
  trap 'kill "$nap" 2>/dev/null; exit 0' TERM
  while :; do
    sleep 60 & nap=$!
    wait "$nap"
    log "Still building... $(( ($(date +%s) - start) / 60 )) min elapsed"
  done
) >&2 &
heartbeat=$!
trap 'kill $heartbeat 2>/dev/null || true; rm -rf "$WORK"' EXIT

build_etcd() {
  [[ -x "$BIN_DIR/etcd" ]] && return 0
  log "Building etcd $ETCD_VERSION from the module proxy"
  local d="$WORK/etcd"
  mkdir -p "$d"
  cat >"$d/main.go" <<'GO'
// Command etcd runs the etcd server (built from the Go module proxy for envtest).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  # etcd's own module has replace directives, so `go install` cannot build it: use a scratch module.
  (cd "$d" && go mod init local/etcd >/dev/null 2>&1 \
    && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null \
    && go mod tidy >/dev/null \
    && go build -trimpath -o "$BIN_DIR/etcd.tmp" . && mv "$BIN_DIR/etcd.tmp" "$BIN_DIR/etcd")
  log "etcd ready"
}

build_kube() {
  local missing=() c
  for c in "${KUBE_CMDS[@]}"; do
    [[ -x "$BIN_DIR/$c" ]] || missing+=("$c")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  log "Building ${missing[*]} $KUBE_VERSION from the module proxy (staging modules $STAGING_VERSION)"
  local d="$WORK/kube"
  mkdir -p "$d"
  local info kgomod kdir gover
  # Outside any module, so the repository's go.mod is never consulted or touched.
  info="$(cd "$WORK" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION")"
  kgomod="$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' <<<"$info")"
  kdir="$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' <<<"$info")"
  [[ -f "$kgomod" && -d "$kdir" ]] || { log "could not resolve k8s.io/kubernetes@$KUBE_VERSION"; exit 1; }
  gover="$(sed -n 's/^go \(.*\)$/\1/p' "$kgomod" | head -1)"
  {
    echo "module local/kube"
    echo
    echo "go $gover"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    # k8s.io/kubernetes points every staging module at ./staging; use the published versions.
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/' "$kgomod" \
      | awk -v v="$STAGING_VERSION" '{print "replace " $1 " => " $1 " " v}'
  } >"$d/go.mod"
  for c in "${missing[@]}"; do
    [[ -d "$kdir/cmd/$c" ]] || { log "k8s.io/kubernetes has no cmd/$c"; exit 1; }
    mkdir -p "$d/$c"
    cp "$kdir/cmd/$c/"*.go "$d/$c/"
    rm -f "$d/$c/"*_test.go
    chmod u+w "$d/$c/"*.go
  done
  local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  (cd "$d" && go mod tidy >/dev/null)
  for c in "${missing[@]}"; do
    log "Compiling $c"
    (cd "$d" && go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR/$c.tmp" "./$c" && mv "$BIN_DIR/$c.tmp" "$BIN_DIR/$c")
  done
  log "${missing[*]} ready"
}

# check_versions fails loudly if a binary reports another version than the one it is cached under.
check_versions() {
  local got
  got="$("$BIN_DIR/kube-apiserver" --version 2>&1 || true)"
  [[ "$got" == *"$KUBE_VERSION"* ]] || { log "kube-apiserver reports '$got', want $KUBE_VERSION"; exit 1; }
  got="$("$BIN_DIR/etcd" --version 2>&1 || true)"
  [[ "$got" == *"${ETCD_VERSION#v}"* ]] || { log "etcd reports '$got', want $ETCD_VERSION"; exit 1; }
}

build_etcd
build_kube
check_versions
log "Control plane ready in $(( $(date +%s) - start )) s: $BIN_DIR"
echo "$BIN_DIR"
