#!/usr/bin/env bash
# Cross-builds mcpctl for the release: one static binary per platform (CGO off, -trimpath, the
# version and commit linked in, as `mcpctl version` reports them) and a SHA256SUMS file beside
# them, in sha256sum's format.
#
# Usage: hack/dist.sh OUT_DIR VERSION COMMIT [PLATFORM...]
#   PLATFORM is GOOS/GOARCH; default linux/amd64 linux/arm64 darwin/amd64 darwin/arm64.
# Writes OUT_DIR/mcpctl-VERSION-GOOS-GOARCH for each platform and OUT_DIR/SHA256SUMS.
set -euo pipefail

cd "$(dirname "$0")/.."

if [[ $# -lt 3 ]]; then
  echo "usage: hack/dist.sh OUT_DIR VERSION COMMIT [GOOS/GOARCH...]" >&2
  exit 2
fi
out="$1" version="$2" commit="$3"
shift 3
platforms=("$@")
if [[ ${#platforms[@]} -eq 0 ]]; then
  platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
fi

mkdir -p "$out"
names=()
for p in "${platforms[@]}"; do
  os="${p%/*}" arch="${p#*/}"
  if [[ -z "$os" || -z "$arch" || "$p" != */* ]]; then
    echo "dist: platform $p is not GOOS/GOARCH" >&2
    exit 2
  fi
  name="mcpctl-$version-$os-$arch"
  echo "[dist] $name" >&2
  CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath \
    -ldflags "-s -w -X main.version=$version -X main.commit=$commit" -o "$out/$name" ./cmd/mcpctl
  names+=("$name")
done
(cd "$out" && sha256sum "${names[@]}" > SHA256SUMS)
echo "[dist] $out/SHA256SUMS" >&2
