# warren — one binary that turns a directory or a git repository into jailed
# workspaces for AI agents. `just` lists the recipes.

set shell := ["bash", "-euo", "pipefail", "-c"]

bin := "bin/warren"

default:
    @just --list

# Install what serving needs when it is missing: bubblewrap, nothing else (Debian; asks apt as root).
deps:
    #!/usr/bin/env bash
    set -euo pipefail
    if ! command -v bwrap >/dev/null; then
      if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq bubblewrap;
      else echo "bubblewrap is missing: run 'sudo apt-get install -y bubblewrap'" >&2; exit 1; fi
    fi

# Install what the tests need besides: git (test repositories), curl (the network tests run it in jails), Chromium (the console's browser tests), PostgreSQL 15 (the store tests run on it too).
test-deps: deps
    #!/usr/bin/env bash
    set -euo pipefail
    missing=()
    command -v git >/dev/null || missing+=(git)
    command -v curl >/dev/null || missing+=(curl ca-certificates)
    command -v strace >/dev/null || missing+=(strace)
    [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
    command -v chromium >/dev/null || missing+=(chromium fonts-liberation)
    [ -x /usr/lib/postgresql/15/bin/postgres ] || missing+=(postgresql-15)
    if [ ${#missing[@]} -gt 0 ]; then
      if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}";
      else echo "the tests need ${missing[*]}: run 'sudo apt-get install -y --no-install-recommends ${missing[*]}'" >&2; exit 1; fi
    fi

# Build warren and the runner it starts in every jail into a directory (bin/ unless told): bin/warren and bin/warren-runner, static, stripped, the version from git.
build out=bin:
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)" -o {{out}} ./cmd/warren ./cmd/warren-runner

# Serve the current directory over MCP on stdio with embedded defaults.
serve *ARGS: deps build
    ./{{bin}} serve {{ if ARGS == "" { "stdio --workspace ." } else { ARGS } }}

# Run every test against real jails, SQLite, PostgreSQL and git (the console's in headless Chromium).
test: test-deps
    just conformance
    just web-check
    CGO_ENABLED=0 go test -trimpath -count=1 -timeout 20m ./...

# Run the official MCP conformance suite, 0.1.16 and the newest published, against `serve http --auth none` (installs Node 22 into bin/).
conformance: test-deps
    ./mcp/conformance/run.sh

# Run the sandbox benchmarks (the Shell against a raw jailed sh).
bench: test-deps
    go test -run '^$' -bench . -benchtime 2000x ./sandbox/

# Run every benchmark that has a target, print each ratio to its floor, and fail when one is missed (targets: cmd/benchcheck).
bench-check: test-deps
    go test -run '^$' -bench 'AgainstFloors|ExecBuiltin|ExecExternal|ToolRoundTrip|ObsOverhead|IdleRSS|Sessions200' -benchtime 2000x ./sandbox/ ./cmd/warren/ ./agent/ | grep -v '^ *e2e_helpers_test' | go run ./cmd/benchcheck

# Benchmark the MCP server: per-call benchmarks against their floors (2,000 calls each), then the whole-server scenarios once each (idle memory, 200 sessions, the soak, usage lost to kill -9).
bench-mcp: test-deps
    go test -run '^$' -bench 'AgainstFloors|ObsOverhead|ConcurrentShellExec|TracedCall' -benchtime 2000x ./cmd/warren/
    go test -run '^$' -bench 'IdleRSS|Sessions200|Soak|UsageLossOnKill' -benchtime 1x ./cmd/warren/

# Compare this tree with another revision (default: the last commit) in one run: the floor, this warren and the other take turns call by call, so the two ratios (TOOL/floor, TOOL/floor-other) differ by what the versions do, not by the machine's load.
bench-against rev="HEAD": test-deps
    #!/usr/bin/env bash
    set -euo pipefail
    dir=$(mktemp -d)
    trap 'git worktree remove --force "$dir/src" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
    git worktree add --detach "$dir/src" "{{rev}}" >/dev/null
    (cd "$dir/src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/bin/warren" ./cmd/warren && \
        CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/bin/warren-runner" ./cmd/warren-runner)
    WARREN_BENCH_OTHER="$dir/bin/warren" go test -run '^$' -bench StdioAgainstFloors -benchtime 2000x ./cmd/warren/ | grep -v '^ *e2e_helpers_test'

# 200 sessions each running a command at once: shell_exec p50/p95, server RSS, memory per idle jail.
bench-sessions: test-deps
    go test -run '^$' -bench Sessions200 -benchtime 1x ./cmd/warren/

# Two 'serve http' replicas on one PostgreSQL: calls/s on one and on two, a call that moves the jail between them, takeover after kill -9.
bench-replicas: test-deps
    go test -run '^$' -bench Replicas -benchtime 1x ./cmd/warren/ | grep -v '^ *e2e_helpers_test'

# Task board: claim and update p50 on a board of 1,000 tasks and 1 MB, against the 5 ms target (fails when over).
bench-tasks:
    go test -run '^$' -bench BoardOps -benchtime 1x ./tasks/

# Build the web console (web/src, TypeScript) into web/dist, which the binary embeds; commit the result.
web-build:
    cd web && npm ci --no-audit --no-fund && node build.mjs

# Rebuild the console and fail if web/dist differs from what is committed.
web-check: web-build
    #!/usr/bin/env bash
    set -euo pipefail
    if [ -n "$(git status --porcelain -- web/dist)" ]; then
      git status --short -- web/dist
      echo "web/dist does not match its sources: run 'just web-build' and commit web/dist" >&2
      exit 1
    fi

# Rebuild the console on every change and serve it from disk (open the printed Web console link).
web-watch: build
    cd web && npm ci --no-audit --no-fund
    (cd web && node build.mjs --watch) & ./{{bin}} serve http --console-dir web/dist

# Run the console's browser tests (headless Chromium) and rewrite the screenshots in docs/console/.
web-screenshots: test-deps web-build
    WARREN_SCREENSHOTS=docs/console go test -count=1 -run 'TestConsole' ./cmd/warren/

# gofmt and go vet must be clean.
lint:
    #!/usr/bin/env bash
    set -euo pipefail
    out=$(gofmt -l $(git ls-files '*.go'))
    if [ -n "$out" ]; then echo "gofmt would change:"; echo "$out"; exit 1; fi
    go vet ./...

# Check that this machine can run jails, and print the fix for what is missing.
doctor: build
    ./{{bin}} doctor
