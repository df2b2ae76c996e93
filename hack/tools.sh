#!/usr/bin/env bash
# Installs the pinned development tools from the Go module proxy into a versioned cache directory
# outside the repository, reusing what is already there. Tools are never added to go.mod.
#
# None of these is a `tool` directive of go.mod: `go get -tool NAME@VERSION` of each one, tried
# against the module proxy, upgrades modules the operator itself builds with (controller-gen:
# golang.org/x/crypto, net, sys, text, tools; kustomize: golang.org/x/sys, text and
# sigs.k8s.io/kustomize/api, kyaml; helm: docker-credential-helpers, evanphx/json-patch;
# golangci-lint: cel.dev/expr, golang.org/x/crypto, net, sys, text, sirupsen/logrus, felixge/
# httpsnoop and about twenty more), because go.mod's one module graph serves both. Installed
# here, each tool keeps its own versions and the binaries' dependencies stay as they are.
#
# Usage: hack/tools.sh                  # install (or reuse) every tool
#        hack/tools.sh controller-gen   # one tool (controller-gen, kustomize, helm, golangci-lint)
#        hack/tools.sh --path NAME      # print the path of NAME's binary, installing it if missing
# Env:   CONNECTOR_MCP_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/connector-mcp)
#
# Each tool lands in $CACHE_ROOT/tools/<name>-<version>/<name>; progress goes to stderr and the
# binary path to stdout, so callers can write TOOL="$(hack/tools.sh --path controller-gen)".
set -euo pipefail

CACHE_ROOT="${CONNECTOR_MCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/connector-mcp}"
TOOLS_DIR="$CACHE_ROOT/tools"

# name -> "module path@version". Keep versions in step with docs/development.md.
declare -A TOOLS=(
  [controller-gen]="sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0"
  [kustomize]="sigs.k8s.io/kustomize/kustomize/v5@v5.8.2"
  [helm]="helm.sh/helm/v3/cmd/helm@v3.22.0"
  [golangci-lint]="github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0"
  [actionlint]="github.com/rhysd/actionlint/cmd/actionlint@v1.7.12"
)
ORDER=(controller-gen kustomize helm golangci-lint actionlint)

log() { printf '[tools] %s\n' "$*" >&2; }

# tool_bin NAME prints the cached binary path of NAME (whether or not it exists yet).
tool_bin() {
  local name="$1" spec="${TOOLS[$1]}"
  printf '%s/%s-%s/%s\n' "$TOOLS_DIR" "$name" "${spec##*@}" "$name"
}

# install_tool NAME installs NAME unless its versioned binary is already cached.
install_tool() {
  local name="$1"
  if [[ -z "${TOOLS[$name]+x}" ]]; then
    log "Unknown tool '$name' (known: ${ORDER[*]})"
    return 2
  fi
  local spec="${TOOLS[$name]}" bin dir
  bin="$(tool_bin "$name")"
  dir="$(dirname "$bin")"
  if [[ -x "$bin" ]]; then
    log "Using cached $name ${spec##*@}"
    return 0
  fi
  mkdir -p "$dir"
  # One installer per tool at a time: concurrent make targets must not race on the same binary.
  exec 9>"$dir.lock"
  flock 9
  if [[ -x "$bin" ]]; then
    log "Using cached $name ${spec##*@}"
    exec 9>&-
    return 0
  fi
  log "Installing $name ${spec##*@} from the module proxy (go install $spec)"
  local start tmp
  start=$(date +%s)
  tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
  # Run outside the repository so the project's go.mod is neither consulted nor touched.
  (cd "$tmp" && GOBIN="$tmp" GOFLAGS='' GOTOOLCHAIN=local go install "$spec")
  mv "$tmp/$name" "$bin"
  rm -rf "$tmp"
  exec 9>&-
  log "$name ${spec##*@} ready in $(( $(date +%s) - start )) s"
}

main() {
  if [[ "${1:-}" == "--path" ]]; then
    [[ $# -eq 2 ]] || { log "usage: $0 --path NAME"; exit 2; }
    install_tool "$2"
    tool_bin "$2"
    return 0
  fi
  local names=("$@")
  [[ ${#names[@]} -gt 0 ]] || names=("${ORDER[@]}")
  local n
  for n in "${names[@]}"; do
    install_tool "$n"
  done
  for n in "${names[@]}"; do
    tool_bin "$n"
  done
}

main "$@"
