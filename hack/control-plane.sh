#!/usr/bin/env bash
# Builds kube-apiserver, kubectl and etcd from source through the Go module proxy and caches the
# binaries by version outside the repository, so a second run is instant.
#
# Usage: hack/control-plane.sh            # build (or reuse) and print the bin directory
# Env:   CONNECTOR_MCP_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/connector-mcp)
#        KUBE_VERSION         k8s.io/kubernetes version (default v1.37.2)
#        ETCD_VERSION         etcd server version (default v3.7.3)
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
CACHE_ROOT="${CONNECTOR_MCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/connector-mcp}"
BIN_DIR="$CACHE_ROOT/control-plane/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"
STAGING_VERSION="v0.${KUBE_VERSION#v1.}"

log() { printf '[control-plane] %s\n' "$*" >&2; }

if [[ -x "$BIN_DIR/kube-apiserver" && -x "$BIN_DIR/kubectl" && -x "$BIN_DIR/etcd" ]]; then
  log "Using cached binaries in $BIN_DIR"
  echo "$BIN_DIR"
  exit 0
fi

mkdir -p "$BIN_DIR"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export GOFLAGS="-mod=mod"
export CGO_ENABLED=0

# Heartbeat so a cold build (~15 minutes on 2 cores) visibly makes progress.
start=$(date +%s)
( while sleep 60; do log "Still building... $(( ($(date +%s) - start) / 60 )) min elapsed"; done ) &
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
  (cd "$d" && go mod init local/etcd >/dev/null 2>&1 \
    && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null \
    && go mod tidy >/dev/null \
    && go build -trimpath -o "$BIN_DIR/etcd.tmp" . && mv "$BIN_DIR/etcd.tmp" "$BIN_DIR/etcd")
  log "etcd ready"
}

build_kube() {
  [[ -x "$BIN_DIR/kube-apiserver" && -x "$BIN_DIR/kubectl" ]] && return 0
  log "Building kube-apiserver and kubectl $KUBE_VERSION from the module proxy (staging $STAGING_VERSION)"
  local d="$WORK/kube"
  mkdir -p "$d"
  local kgomod
  kgomod="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  local kdir
  kdir="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  local gover
  gover="$(sed -n 's/^go \(.*\)$/\1/p' "$kgomod" | head -1)"
  {
    echo "module local/kube"
    echo
    echo "go $gover"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    # Every staging module replaced by its published version.
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/' "$kgomod" \
      | awk -v v="$STAGING_VERSION" '{print "replace " $1 " => " $1 " " v}'
  } >"$d/go.mod"
  for cmd in kube-apiserver kubectl; do
    mkdir -p "$d/$cmd"
    cp "$kdir/cmd/$cmd/"*.go "$d/$cmd/"
    rm -f "$d/$cmd/"*_test.go
    chmod u+w "$d/$cmd/"*.go
  done
  local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  (cd "$d" && go mod tidy >/dev/null)
  for cmd in kube-apiserver kubectl; do
    log "Compiling $cmd"
    (cd "$d" && go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR/$cmd.tmp" "./$cmd" && mv "$BIN_DIR/$cmd.tmp" "$BIN_DIR/$cmd")
  done
  log "kube-apiserver and kubectl ready"
}

build_etcd
build_kube
log "Control plane ready in $(( $(date +%s) - start )) s: $BIN_DIR"
echo "$BIN_DIR"
