# cli_ollama.sh — Ollama's API on `llmchat serve` (srv_ollama.c): the wire
# format with curl (NDJSON lines, the probe, errors, the Unix socket's HTTP side,
# the API key), then the official `ollama` npm client (tests/js/ollama_client.mjs).
. tests/lib_cli.sh
. tests/lib_server.sh

S="$TMP/o.sock"
if ! serve "$TMP/serve.log" -m "$MODEL" --socket "$S" --db "" --listen 127.0.0.1:0; then
    bad "serve starts" "$(cat "$TMP/serve.log")"
    finish
    exit 1
fi
PORT=$(grep -oE 'tcp port [0-9]+' "$TMP/serve.log" | grep -oE '[0-9]+$')
T="curl -s --max-time 20 http://127.0.0.1:$PORT"
U="curl -s --max-time 20 --unix-socket $S http://x"

# ---- the small endpoints ----
check "HEAD /: 200, as Ollama's probe wants" '^HTTP/1.1 200' "$($T/ -I)"
check "GET /: Ollama is running" '^Ollama is running$' "$($T/)"
check "/api/version" '^\{"version":"[0-9]+\.[0-9]+\.[0-9]+"\}$' "$($T/api/version)"
out=$($T/api/tags)
check "/api/tags: the loaded model with Ollama's details" \
    '"models":\[\{"name":"stories260K","model":"stories260K","modified_at":"[0-9T:.-]+Z","size":[0-9]+,"digest":"[0-9a-f]+","details":\{"parent_model":"","format":"gguf","family":"llama","families":\["llama"\],"parameter_size":"293K","quantization_level":"F32"\}\}\]' "$out"
check "/api/ps: size_vram 0 on CPU, an expiry" '"expires_at":"[0-9T:-]+Z","size_vram":0' "$($T/api/ps)"
out=$($T/api/show -d '{"model":"llama3.2"}')
check "/api/show: model_info with GGUF keys" '"general.architecture":"llama".*"llama.context_length":512' "$out"
check "/api/show: long arrays are null unless verbose" '"tokenizer.ggml.tokens":null' "$out"
check "/api/show verbose: the token list" '"tokenizer.ggml.tokens":\["<unk>"' "$($T/api/show -d '{"model":"x","verbose":true}')"
check "/api/show: capabilities" '"capabilities":\["completion"\]' "$out"
check "/api/tags is GET only" '^\{"error":"use GET"\} 405$' "$($T/api/tags -X POST -w ' %{http_code}')"

# ---- generation: NDJSON by default ----
$T/api/generate -D "$TMP/h" -o "$TMP/gen" -d '{"model":"llama3.2","prompt":"Once upon a time","raw":true,"options":{"num_predict":6,"temperature":0}}'
check "generate streams application/x-ndjson" 'Content-Type: application/x-ndjson' "$(cat "$TMP/h")"
check "generate: every line but the last is done:false" '^0$' "$(head -n -1 "$TMP/gen" | grep -cv '"done":false}$')"
check "generate: the last line is done with Ollama's counts and durations" \
    '^\{"model":"stories260K","created_at":"[^"]+","response":"","done":true,"done_reason":"length","total_duration":[0-9]+,"load_duration":0,"prompt_eval_count":[0-9]+,"prompt_eval_duration":[0-9]+,"eval_count":6,"eval_duration":[0-9]+\}$' \
    "$(tail -n 1 "$TMP/gen")"
streamed=$(grep -oE '"response":"[^"]*"' "$TMP/gen" | sed -E 's/"response":"(.*)"/\1/' | tr -d '\n')
one=$($T/api/generate -d '{"model":"x","prompt":"Once upon a time","raw":true,"stream":false,"options":{"num_predict":6,"temperature":0}}')
check "generate stream:false: one object" '^\{"model":"stories260K",.*"done":true,.*"eval_count":6,' "$one"
same "generate: the stream's pieces = the one-piece answer" "$streamed" \
    "$(printf '%s' "$one" | sed -E 's/.*"response":"([^"]*)".*/\1/')"
out=$($U/api/chat -d '{"model":"x","messages":[{"role":"user","content":"Hi"}],"options":{"num_predict":3}}')
check "chat over the Unix socket: message pieces, then done" \
    '"message":\{"role":"assistant","content":"[^"]*"\},"done":false\}.*"done":true,"done_reason":"length".*"eval_count":3,' "$(printf '%s' "$out" | tr '\n' ' ')"

# ---- errors, as Ollama gives them ----
check "bad JSON: 400" '^\{"error":"the body is not valid JSON"\} 400$' "$($T/api/chat -d '{oops' -w ' %{http_code}')"
check "no model: 400" '^\{"error":"model is required"\} 400$' "$($T/api/generate -d '{"prompt":"hi"}' -w ' %{http_code}')"
check "images: 400" 'images are not supported.*400$' \
    "$($T/api/generate -d '{"model":"x","prompt":"hi","images":["aGk="]}' -w ' %{http_code}')"
check "format of the wrong kind: 400 naming it" 'format.*must be \\"json\\" or a JSON schema.*400$' \
    "$($T/api/chat -d '{"model":"x","messages":[{"role":"user","content":"hi"}],"format":5}' -w ' %{http_code}')"
check "format with a schema it cannot honour: 400 naming it" "'format'.*pattern.*400$" \
    "$($T/api/chat -d '{"model":"x","messages":[{"role":"user","content":"hi"}],"format":{"type":"string","pattern":"(a)\\1"}}' -w ' %{http_code}')"
check "format with a zod schema (.int() bounds, an email pattern): answered" '"done":true,"done_reason":"(stop|length)".* 200$' \
    "$($T/api/chat -d '{"model":"x","messages":[{"role":"user","content":"hi"}],"stream":false,"options":{"num_predict":8},"format":{"type":"object","properties":{"n":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991},"e":{"type":"string","format":"email","pattern":"^[a-z]+@[a-z]+\\.[a-z]{2,}$"}},"required":["n","e"]}}' -w ' %{http_code}')"
check "tools on /api/generate: 400 pointing at /api/chat" "'tools' are for /api/chat.* 400$" \
    "$($T/api/generate -d '{"model":"x","prompt":"hi","tools":[{"type":"function","function":{"name":"f"}}]}' -w ' %{http_code}')"

# ---- model management: Ollama's error shape, saying why (tools are in cli_server_tools.sh) ----
for route in pull push create copy delete blobs/sha256:0123; do
    what=${route%%/*}
    check "/api/$route: 400 {\"error\"} saying models are GGUF files" \
        "^\\{\"error\":\"models here are GGUF files \\('stories260K' is loaded\\); $what(s)? (is|are) not supported[^\"]*\"\\} 400$" \
        "$($T/api/$route -d '{"model":"llama3.2","name":"llama3.2"}' -w ' %{http_code}')"
done
check "HEAD /api/blobs/...: 400 too" '^HTTP/1.1 400' "$($T/api/blobs/sha256:0123 -I)"
check "an unknown /api/ path: 404 in Ollama's shape" "^\\{\"error\":\"'/api/nope' is not part of Ollama's API here\"\\} 404$" \
    "$($T/api/nope -d '{}' -w ' %{http_code}')"
check "GET /api/embed: 405 in Ollama's shape" '^\{"error":"use POST"\} 405$' "$($T/api/embed -w ' %{http_code}')"
check "template: refused clearly" "'template' is not supported.*400$" \
    "$($T/api/generate -d '{"model":"x","prompt":"hi","template":"{{ .Prompt }}"}' -w ' %{http_code}')"
check "a bad option: 400 naming it" "^\{\"error\":\"options: 'top_k' must be an integer\"\} 400$" \
    "$($T/api/generate -d '{"model":"x","prompt":"hi","options":{"top_k":1.5}}' -w ' %{http_code}')"
check "num_ctx must be a positive integer" "'num_ctx' must be a positive integer.*400$" \
    "$($T/api/generate -d '{"model":"x","prompt":"hi","options":{"num_ctx":0}}' -w ' %{http_code}')"
check "a role no one knows: 400 naming it" "role 'narrator' is not system, user, assistant or tool.*400$" \
    "$($T/api/chat -d '{"model":"x","messages":[{"role":"narrator","content":"42"}]}' -w ' %{http_code}')"
check "suffix on a model without FIM tokens: 400" "does not support insert.*400$" \
    "$($T/api/generate -d '{"model":"x","prompt":"a","suffix":"b"}' -w ' %{http_code}')"
check "keep_alive 0 with no prompt: unload (the model stays)" '"response":"","done_reason":"unload","done":true\}$' \
    "$($T/api/generate -d '{"model":"x","keep_alive":0}')"
stop_server $SP
check "the server stops cleanly" '^0$' "$RC"

# ---- the API key: the probe is open, the API is not ----
if serve "$TMP/key.log" -m "$MODEL" --socket "$TMP/k.sock" --db "" --listen 127.0.0.1:0 --api-key sekrit; then
    KP=$(grep -oE 'tcp port [0-9]+' "$TMP/key.log" | grep -oE '[0-9]+$')
    K="curl -s --max-time 20 http://127.0.0.1:$KP"
    check "with a key: HEAD / still answers" '^HTTP/1.1 200' "$($K/ -I)"
    check "with a key: /api/tags without it is 401, Ollama's shape" '^\{"error":"Invalid API Key"\} 401$' \
        "$($K/api/tags -w ' %{http_code}')"
    check "with a key: /api/tags with it" '"name":"stories260K"' "$($K/api/tags -H 'Authorization: Bearer sekrit')"
    stop_server $SP
else
    bad "serve with --api-key" "$(cat "$TMP/key.log")"
fi
# the key from a file (its first line, spaces around it dropped): off the command line
printf '  filekey \nnot this line\n' >"$TMP/key.txt"
if serve "$TMP/keyf.log" -m "$MODEL" --socket "$TMP/kf.sock" --db "" --listen 127.0.0.1:0 --api-key-file "$TMP/key.txt"; then
    KP=$(grep -oE 'tcp port [0-9]+' "$TMP/keyf.log" | grep -oE '[0-9]+$')
    K="curl -s --max-time 20 -o /dev/null -w %{http_code} http://127.0.0.1:$KP/api/tags"
    check "--api-key-file: without the key 401, with it 200" '^401 200$' "$($K) $($K -H 'Authorization: Bearer filekey')"
    stop_server $SP
else
    bad "serve with --api-key-file" "$(cat "$TMP/keyf.log")"
fi
: >"$TMP/empty.txt"
expect_fail "--api-key-file: an empty file is refused" 1 "the key file is empty" \
    $LLMCHAT serve -m "$MODEL" --socket "$TMP/kx.sock" --api-key-file "$TMP/empty.txt"
expect_fail "--api-key and --api-key-file: one of them" 2 "not both" \
    $LLMCHAT serve -m "$MODEL" --api-key x --api-key-file "$TMP/key.txt"

# ---- fill in the middle: /api/generate with a suffix ----
$LLMCHAT gen-model -o "$TMP/fim.gguf" --vocab "$SHARED/vocab/ggml-vocab-starcoder.gguf" --dim 64 --layers 1 \
    --heads 4 --kv-heads 4 --ffn 128 --ctx 512 --type f16 --tied >/dev/null 2>&1
if serve "$TMP/fim.log" -m "$TMP/fim.gguf" --socket "$TMP/fim.sock" --db ""; then
    F="curl -s --max-time 20 --unix-socket $TMP/fim.sock http://x"
    check "a FIM model: capabilities include insert" '"capabilities":\["completion","insert"\]' "$($F/api/show -d '{"model":"x"}')"
    check "a FIM model: F16 as its quantization level" '"quantization_level":"F16"' "$($F/api/tags)"
    out=$($F/api/generate -d '{"model":"x","prompt":"def add(a, b):\n    return ","suffix":"\n","stream":false,"options":{"num_predict":4,"temperature":0}}')
    check "generate with a suffix: prefix, suffix and the FIM tokens make the prompt" '"done_reason":"length",.*"prompt_eval_count":14,.*"eval_count":4,' "$out"
    stop_server $SP
else
    bad "serve a model with FIM tokens" "$(cat "$TMP/fim.log")"
fi

# ---- the official ollama npm client ----
if [ -f tests/js/node_modules/ollama/package.json ] && command -v node >/dev/null; then
    serve "$TMP/js.log" -m "$MODEL" --socket "$TMP/js.sock" --db "" --listen 127.0.0.1:0
    JP=$(grep -oE 'tcp port [0-9]+' "$TMP/js.log" | grep -oE '[0-9]+$')
    out=$(timeout 300 node tests/js/ollama_client.mjs "http://127.0.0.1:$JP" 2>&1)
    printf '%s\n' "$out" | grep -v '^[0-9]* passed' | sed 's/^/  js: /'
    check "the ollama npm client: every check passes" '^[0-9]+ passed, 0 failed$' "$(printf '%s\n' "$out" | tail -n 1)"
    stop_server $SP
else
    bad "the ollama npm client" "needs node and tests/js/node_modules (make $(echo tests/js/node_modules/.package-lock.json))"
fi
finish
