#!/usr/bin/env bash
# Interop of `warden gateway` with real MCP software: the official Python SDK (mcp 2.3.0) as the
# client, through the gateway over Streamable HTTP to an official-SDK server, through
# `warden gateway --stdio` to the same server as a child, and through `--stdio` to the
# reference server @modelcontextprotocol/server-everything (npm), then `warden gateway scaffold`
# and `warden check --upstream` in front of server-everything; then the official TypeScript SDK
# (@modelcontextprotocol/sdk, pinned in tests/interop/ts/package-lock.json) as the client over
# the same three paths and over Streamable HTTP to server-everything behind a second gateway
# (tests/interop/ts/client.mjs). Against server-everything the TypeScript client also runs a
# task-returning tool (`simulate-research-query`, the tasks extension) with the SDK's own task
# API: held under its task id, committed with the result's digest in its one receipt, and the
# same call again refused -41004 without reaching the server. A stage of ./scripts/test.sh (it
# installs from PyPI and npm, from their caches when warm; it runs after the Rust tests built the CLI):
#
#   cargo build && tests/interop/run.sh
#
# Everything goes under $CARGO_TARGET_DIR/interop/ (default target/: a venv, stores, logs);
# processes started here are stopped by their pid on exit.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
work="$target/interop"
mkdir -p "$work"
if [ ! -x "$work/venv/bin/python" ]; then
  python3 -m venv "$work/venv"
fi
"$work/venv/bin/pip" install --quiet "mcp==2.3.0"
npm install --silent --no-audit --no-fund --prefix "$work/npm" "@modelcontextprotocol/server-everything@2026.8.31"
export PATH="$target/debug:$PATH"
python="$work/venv/bin/python"
run="$(mktemp -d "$work/run.XXXXXX")"
cat > "$run/warden.yaml" <<'YAML'
schema: warden/v1
actions:
  mcp.acme.create_refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_gte: 0, amount_lte: 50000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 1000000 }
        decision: approve
      - decision: deny
  mcp.acme.read_only:
    decision: allow
  mcp.acme.weather:
    decision: allow
  mcp.acme.linked:
    decision: allow
YAML
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

port="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$python" "$root/tests/interop/sdk_server.py" http "$port" >"$run/upstream.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  if "$python" -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; then break; fi
  sleep 0.1
done
# --refusal-status 200: the TypeScript SDK reads a refusal's JSON-RPC error only from a 2xx (the
# Python SDK reads it either way).
warden gateway --upstream "http://127.0.0.1:$port/mcp" --alias acme --principal sdk-agent \
  --refusal-status 200 --listen 127.0.0.1:0 --config "$run/warden.yaml" --store "$run/http.redb" >"$run/gateway.out" 2>"$run/gateway.err" &
pids+=($!)
for _ in $(seq 100); do
  if [ -s "$run/gateway.out" ]; then break; fi
  sleep 0.1
done
url="$(head -1 "$run/gateway.out" | sed 's/^warden gateway: listening on //')"
echo "== HTTP: SDK client -> warden gateway ($url) -> SDK server"
"$python" "$root/tests/interop/sdk_client.py" "$url" "http://127.0.0.1:$port/mcp" "$run/http.redb" "$run/warden.yaml"
echo "== stdio: SDK client -> warden gateway --stdio -> SDK server (child)"
"$python" "$root/tests/interop/sdk_client.py" stdio "$root/tests/interop/sdk_server.py" "$run/stdio.redb" "$run/warden.yaml" 2>"$run/stdio.err"
cat > "$run/everything.yaml" <<'YAML'
schema: warden/v1
actions:
  mcp.everything.echo:
    decision: allow
  mcp.everything.trigger-elicitation-request:
    decision: allow
  mcp.everything.get-sum:
    effect: "sum:{a}+{b}"
    rules:
      - when: { a_lte: 100 }
        decision: allow
      - when: { a_lte: 1000 }
        decision: approve
      - decision: deny
  # A task-returning tool (the tasks extension): held under its task id until it completes.
  mcp.everything.simulate-research-query:
    effect: "research:{topic}"
    decision: allow
YAML
echo "== stdio: SDK client -> warden gateway --stdio -> @modelcontextprotocol/server-everything"
"$python" "$root/tests/interop/sdk_everything.py" "$run/everything.redb" "$run/everything.yaml" \
  "$work/npm/node_modules/.bin/mcp-server-everything" 2>"$run/everything.err"
# The TypeScript SDK client: `npm ci` from the lock file (again only when the lock changed), and
# the script beside its node_modules, since ES modules resolve packages from the file's folder.
ts="$work/ts"
mkdir -p "$ts"
if ! cmp -s "$root/tests/interop/ts/package-lock.json" "$ts/node_modules/.warden-lock.json" 2>/dev/null; then
  cp "$root/tests/interop/ts/package.json" "$root/tests/interop/ts/package-lock.json" "$ts/"
  (cd "$ts" && npm ci --prefer-offline --silent --no-audit --no-fund)
  cp "$root/tests/interop/ts/package-lock.json" "$ts/node_modules/.warden-lock.json"
fi
cp "$root/tests/interop/ts/client.mjs" "$ts/"
echo "== HTTP: TypeScript SDK client -> warden gateway ($url) -> SDK server"
node "$ts/client.mjs" http "$url" "$run/http.redb" "$run/warden.yaml"
echo "== stdio: TypeScript SDK client -> warden gateway --stdio -> SDK server (child)"
INTEROP_PYTHON="$python" node "$ts/client.mjs" stdio-sdk "$root/tests/interop/sdk_server.py" "$run/ts-stdio.redb" "$run/warden.yaml"
echo "== stdio: TypeScript SDK client -> warden gateway --stdio -> @modelcontextprotocol/server-everything"
node "$ts/client.mjs" stdio-everything "$work/npm/node_modules/.bin/mcp-server-everything" "$run/ts-everything.redb" "$run/everything.yaml"
# server-everything over Streamable HTTP (its own CLI: `streamableHttp`, port from $PORT), behind
# a second HTTP gateway, for the task over HTTP (where the gateway also polls the task itself).
everything_port="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
PORT="$everything_port" "$work/npm/node_modules/.bin/mcp-server-everything" streamableHttp >"$run/everything-http.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  if "$python" -c "import socket; socket.create_connection(('127.0.0.1', $everything_port), 0.2)" 2>/dev/null; then break; fi
  sleep 0.1
done
warden gateway --upstream "http://127.0.0.1:$everything_port/mcp" --alias everything --principal ts-agent \
  --refusal-status 200 --listen 127.0.0.1:0 --config "$run/everything.yaml" --store "$run/ts-everything-http.redb" \
  >"$run/everything-gateway.out" 2>"$run/everything-gateway.err" &
pids+=($!)
for _ in $(seq 100); do
  if [ -s "$run/everything-gateway.out" ]; then break; fi
  sleep 0.1
done
everything_url="$(head -1 "$run/everything-gateway.out" | sed 's/^warden gateway: listening on //')"
echo "== HTTP: TypeScript SDK client -> warden gateway ($everything_url) -> @modelcontextprotocol/server-everything"
node "$ts/client.mjs" http-everything "$everything_url" "$run/ts-everything-http.redb" "$run/everything.yaml"
echo "interop: all checks passed"
