#!/usr/bin/env bash
# Installs the TypeScript MCP SDK (@modelcontextprotocol/sdk, pinned) with npm into a cache
# directory outside the repository, reused when present, and prints its node_modules directory.
# The gateway's TypeScript interop test (internal/gateway/ts_interop_test.go) runs node against it:
#   ${CONNECTOR_MCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/connector-mcp}/ts-sdk/node_modules
set -euo pipefail
SDK_VERSION="1.32.2"
CACHE="${CONNECTOR_MCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/connector-mcp}"
DIR="$CACHE/ts-sdk"
stamp="$DIR/.installed-$SDK_VERSION"
if [[ ! -f "$stamp" || ! -f "$DIR/node_modules/@modelcontextprotocol/sdk/package.json" ]]; then
  command -v npm >/dev/null || { echo "ts-sdk: npm is required" >&2; exit 1; }
  echo "ts-sdk: installing @modelcontextprotocol/sdk@$SDK_VERSION into $DIR" >&2
  mkdir -p "$DIR"
  npm install --silent --no-audit --no-fund --prefix "$DIR" "@modelcontextprotocol/sdk@$SDK_VERSION" >&2
  touch "$stamp"
fi
echo "$DIR/node_modules"
