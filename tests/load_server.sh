#!/bin/sh
# load_server.sh — the server's load test (not part of `make test`; needs node):
# starts `llmchat serve` on a Unix socket and a loopback TCP port, runs
# tests/tools/server_load.mjs against it (64 streaming clients plus churn for
# 60 s by default), then stops the server with SIGTERM and reports how long
# that took. Exit status 1 when any request failed or the server wedged.
#
#   sh tests/load_server.sh [--over tcp|unix] [server_load.mjs options...]
#   MODEL=path/to.gguf sh tests/load_server.sh --seconds 60
LLMCHAT=${LLMCHAT:-./build/llmchat}
MODEL=${MODEL:-../shared/models/stories260K.gguf}
over=unix
if [ "$1" = "--over" ]; then over=$2; shift 2; fi
TMP=$(mktemp -d)
trap 'kill -9 $SP 2>/dev/null; rm -rf "$TMP"' EXIT
$LLMCHAT serve -m "$MODEL" --socket "$TMP/s.sock" --db "" --listen 127.0.0.1:0 2>"$TMP/serve.log" &
SP=$!
i=0
while [ $i -lt 200 ] && ! grep -q " on unix:" "$TMP/serve.log"; do sleep 0.05; i=$((i + 1)); done
PORT=$(grep -oE 'tcp port [0-9]+' "$TMP/serve.log" | grep -oE '[0-9]+$')
[ -n "$PORT" ] || { cat "$TMP/serve.log"; exit 1; }
echo "model $MODEL, over $over, $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
if [ "$over" = tcp ]; then node tests/tools/server_load.mjs --port "$PORT" "$@"
else node tests/tools/server_load.mjs --unix "$TMP/s.sock" "$@"; fi
rc=$?
t0=$(date +%s%N)
kill -TERM $SP
wait $SP
src=$?
echo "SIGTERM: exit status $src in $((($(date +%s%N) - t0) / 1000000)) ms"
[ $rc -eq 0 ] && [ $src -eq 0 ]
