# cli_embed.sh — embeddings end to end on the real model: `llmchat embed`, the
# server's POST /v1/embeddings, /embeddings, /api/embed and /api/embeddings with
# curl (shapes, base64, truncation, every refusal), and the official `openai`
# and `ollama` npm clients (tests/js/embeddings.mjs).
. tests/lib_cli.sh
. tests/lib_server.sh

DIM=64 # stories260K's embedding width
# js EXPR JSON [JSON_B]: evaluates EXPR with `j` = the parsed JSON and `b` = JSON_B
# (node, as the client tests need)
js() { printf '%s' "$2" | B=${3:-null} node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{const j=JSON.parse(s),b=JSON.parse(process.env.B);console.log($1)})"; }
NORM='(v=>Math.sqrt(v.reduce((s,x)=>s+x*x,0)).toFixed(5))'

# ---- llmchat embed ----
cli=$($LLMCHAT embed -m "$MODEL" "Once upon a time" "The dog ran." 2>"$TMP/err")
check "embed: one JSON array per text" '^2$' "$(printf '%s\n' "$cli" | grep -c '^\[-\?[0-9]')"
check "embed: $DIM numbers of norm 1" "^$DIM 1.00000\$" "$(js "j.length+' '+$NORM(j)" "$(printf '%s\n' "$cli" | head -n 1)")"
expect_fail "embed: an empty text is refused" 1 "text 1 is empty" $LLMCHAT embed -m "$MODEL" ""

S=$TMP/s.sock
H="curl -s --max-time 20 --unix-socket $S"
if ! serve "$TMP/serve.log" -m "$MODEL" --socket "$S" --db "$TMP/db.sqlite" --listen 127.0.0.1:0; then
    bad "serve starts" "$(cat "$TMP/serve.log")"
    finish
    exit 1
fi
ok "serve starts"
PORT=$(grep -oE 'tcp port [0-9]+' "$TMP/serve.log" | grep -oE '[0-9]+$')

# ---- OpenAI ----
out=$($H http://x/v1/embeddings -d '{"model":"m","input":"Once upon a time"}')
one=$out
check "v1/embeddings: list, one embedding, usage" '^\{"object":"list","data":\[\{"object":"embedding","index":0,"embedding":\[-?[0-9].*\]\}\],"model":"stories260K","usage":\{"prompt_tokens":[0-9]+,"total_tokens":[0-9]+\}\}$' "$out"
check "v1/embeddings: $DIM numbers of norm 1" "^$DIM 1.00000\$" "$(js "j.data[0].embedding.length+' '+$NORM(j.data[0].embedding)" "$out")"
# (within 1e-5, not printed digits: a value near a rounding edge prints differently)
check "v1/embeddings = llmchat embed" '^true$' \
    "$(js "j.data[0].embedding.length===b.length && j.data[0].embedding.every((x,k)=>Math.abs(x-b[k])<1e-5)" "$out" "$(printf '%s\n' "$cli" | head -n 1)")"
out2=$($H http://x/embeddings -d '{"input":["Once upon a time","The dog ran.","Once upon a time"]}')
check "embeddings (alias): three in order" '"index":0.*"index":1.*"index":2' "$out2"
check "batched = alone; same text same vector; texts differ" '^true true false$' \
    "$(js "[0,2].map(i=>j.data[i].embedding.every((x,k)=>Math.abs(x-b.data[0].embedding[k])<1e-6)).join(' ')+' '+j.data[1].embedding.every((x,k)=>Math.abs(x-b.data[0].embedding[k])<1e-2)" "$out2" "$one")"
out=$($H http://x/v1/embeddings -d '{"input":[[1,403,407,261,378],[1,403]],"encoding_format":"float"}')
check "v1/embeddings: arrays of token ids, usage" '"index":1,.*"usage":\{"prompt_tokens":7,"total_tokens":7\}' "$out"
out=$($H http://x/v1/embeddings -d '{"input":[1,403,407,261,378]}')
check "v1/embeddings: one array of token ids is one input" '^\{"object":"list","data":\[\{[^]]*\]\}\],.*"prompt_tokens":5,' "$out"
out=$($H http://x/v1/embeddings -d '{"input":"The dog ran.","encoding_format":"base64","dimensions":64}')
b64=$(js "j.data[0].embedding" "$out")
check "v1/embeddings base64: a string of $DIM float32" "^$((DIM * 4))\$" "$(printf '%s' "$b64" | base64 -d | wc -c)"
check "v1/embeddings base64 = float" '^true$' "$(js "(()=>{const b=Buffer.from(j.data[0].embedding,'base64');const f=$(printf '%s\n' "$cli" | tail -n 1);return f.every((x,i)=>Math.abs(x-b.readFloatLE(4*i))<1e-6)})()" "$out")"

long=$(awk 'BEGIN{for(i=0;i<300;i++)printf "the dog and the cat. "}')
bad400() { # NAME PATH BODY PATTERN: status 400 with an error message matching PATTERN
    code=$($H -o "$TMP/body" -w '%{http_code}' "http://x$2" -d "$3")
    if [ "$code" = 400 ] && grep -qE -- "$4" "$TMP/body"; then ok "$1"
    else bad "$1" "status $code" "body: $(head -c 300 "$TMP/body")"; fi
}
bad400 "v1: empty string" /v1/embeddings '{"input":""}' '"message":"'"'"'input'"'"' is an empty string"'
bad400 "v1: empty array" /v1/embeddings '{"input":[]}' 'is an empty array'
bad400 "v1: no input" /v1/embeddings '{"model":"m"}' "'input' is required"
bad400 "v1: an empty string among others" /v1/embeddings '{"input":["a",""]}' "'input\[1\]' is an empty string"
bad400 "v1: dimensions other than the model's" /v1/embeddings '{"input":"a","dimensions":32}' "'dimensions' must be $DIM"
bad400 "v1: unknown encoding_format" /v1/embeddings '{"input":"a","encoding_format":"int8"}' 'encoding_format'
bad400 "v1: token id outside the vocabulary" /v1/embeddings '{"input":[[1,99999]]}' 'not a token id'
bad400 "v1: input of the wrong type" /v1/embeddings '{"input":{"a":1}}' "'input' must be a string"
bad400 "v1: longer than the context" /v1/embeddings "{\"input\":\"$long\"}" 'tokens; the context is 512'
bad400 "v1: not JSON" /v1/embeddings '{"input":' 'not valid JSON'
code=$($H -o /dev/null -w '%{http_code}' http://x/v1/embeddings)
check "v1: GET is 405" '^405$' "$code"

# ---- Ollama ----
out=$($H http://x/api/embed -d '{"model":"m","input":["Once upon a time","The dog ran."]}')
check "api/embed: model, embeddings, durations, count" '^\{"model":"stories260K","embeddings":\[\[-?[0-9][^]]*\],\[-?[0-9][^]]*\]\],"total_duration":[0-9]+,"load_duration":0,"prompt_eval_count":[0-9]+\}$' "$out"
check "api/embed: $DIM numbers of norm 1" "^$DIM 1.00000\$" "$(js "j.embeddings[1].length+' '+$NORM(j.embeddings[1])" "$out")"
out=$($H http://x/api/embed -d '{"model":"m","input":"Once upon a time"}')
check "api/embed: a string is one input" '^1$' "$(js "j.embeddings.length" "$out")"
out=$($H http://x/api/embed -d "{\"model\":\"m\",\"input\":\"$long\"}")
check "api/embed: truncates to the context by default" '"prompt_eval_count":512\}$' "$out"
code=$($H -o "$TMP/body" -w '%{http_code}' http://x/api/embed -d "{\"input\":\"$long\",\"truncate\":false}")
check "api/embed: truncate false refuses a long input" '^400 \{"error":".*the context is 512"\}$' "$code $(cat "$TMP/body")"
code=$($H -o "$TMP/body" -w '%{http_code}' http://x/api/embed -d '{"input":[]}')
check "api/embed: empty input is 400" '^400 \{"error":' "$code $(cat "$TMP/body")"
code=$($H -o "$TMP/body" -w '%{http_code}' http://x/api/embed -d '{"input":[[1,2]]}')
check "api/embed: token arrays are not Ollama's" '^400 \{"error":".*must be a string' "$code $(cat "$TMP/body")"
out=$($H http://x/api/embeddings -d '{"model":"m","prompt":"Once upon a time"}')
check "api/embeddings: one vector" "^$DIM 1.00000\$" "$(js "j.embedding.length+' '+$NORM(j.embedding)" "$out")"
code=$($H -o "$TMP/body" -w '%{http_code}' http://x/api/embeddings -d '{"model":"m","prompt":""}')
check "api/embeddings: empty prompt is 400" '^400 \{"error":' "$code $(cat "$TMP/body")"

# ---- the official clients ----
if [ -d tests/js/node_modules/openai ] && [ -d tests/js/node_modules/ollama ]; then
    node tests/js/embeddings.mjs "$PORT" "$DIM" >"$TMP/js.out" 2>&1
    while IFS= read -r line; do
        case $line in
        "ok "*) ok "js: ${line#ok }" ;;
        "FAIL "*) bad "js: ${line#FAIL }" ;;
        esac
    done <"$TMP/js.out"
    grep -qE '^(ok|FAIL) ' "$TMP/js.out" || bad "js: the client script ran" "$(head -c 600 "$TMP/js.out")"
else
    bad "js: the npm clients are installed" "run make tests/js/node_modules/.package-lock.json"
fi

out=$($H http://x/health)
check "server still healthy" '"status":"ok"' "$out"
stop_server "$SP"
check "server stops cleanly" '^0$' "$RC"
finish
