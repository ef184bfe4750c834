# cli_server_extras.sh — llama-server's extra endpoints and OpenAI's gaps on
# `llmchat serve`: /tokenize and /detokenize (round trip, pieces), /apply-template
# (the generation prompt; every reference template byte for byte through the
# server), /props, /metrics (counters move), /slots, /v1/models/{id}, prompt
# lists on /v1/completions (curl and the official openai client), CORS (the
# default, --cors-origin, the preflight without the API key), --no-metrics.
. tests/lib_cli.sh
. tests/lib_server.sh

S=$TMP/s.sock
H="curl -s --max-time 20 --unix-socket $S"
QWEN=$SHARED/reference/templates/Qwen-Qwen2.5-7B-Instruct.jinja
if ! serve "$TMP/serve.log" -m "$MODEL" --socket "$S" --db "" --listen 127.0.0.1:0 --chat-template-file "$QWEN"; then
    bad "serve starts" "$(cat "$TMP/serve.log")"
    finish
    exit 1
fi
ok "serve starts"
PORT=$(grep -oE 'tcp port [0-9]+' "$TMP/serve.log" | grep -oE '[0-9]+$')
T="curl -s --max-time 20 http://127.0.0.1:$PORT"

# ---- /tokenize, /detokenize ----
for text in "Once upon a time" "  two  spaces
and a newline	and a tab" "héllo wörld — 🙂 ünïcödé"; do
    ids=$($H http://x/tokenize -d "$(jq -cn --arg t "$text" '{content: $t}')" | jq -c .tokens)
    back=$($H http://x/detokenize -d "{\"tokens\":$ids}" | jq -r .content)
    same "tokenize -> detokenize gives the text back: $(printf '%s' "$text" | head -n 1)" "$text" "$back"
done
text="héllo 🙂"
$H http://x/tokenize -d "$(jq -cn --arg t "$text" '{content: $t, with_pieces: true}')" >"$TMP/pieces.json"
$H http://x/tokenize -d "$(jq -cn --arg t "$text" '{content: $t}')" >"$TMP/ids.json"
if python3 - "$TMP/pieces.json" "$TMP/ids.json" "$text" <<'PY'
import json, sys
pieces = json.load(open(sys.argv[1]))["tokens"]
ids = json.load(open(sys.argv[2]))["tokens"]
raw = b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"]) for p in pieces)
ok = [p["id"] for p in pieces] == ids and raw == (" " + sys.argv[3]).encode() \
    and any(isinstance(p["piece"], list) for p in pieces) and any(isinstance(p["piece"], str) for p in pieces)
sys.exit(0 if ok else 1)
PY
then ok "with_pieces: the ids, string pieces, byte arrays for cut characters; the bytes spell the text"
else bad "with_pieces" "$(cat "$TMP/pieces.json")"; fi
check "add_special: BOS first" '^\{"tokens":\[1,' "$($H http://x/tokenize -d '{"content":"Once","add_special":true}')"
check_not "no BOS by default" '^\{"tokens":\[1,' "$($H http://x/tokenize -d '{"content":"Once"}')"
check "special token texts are parsed by default" '^\{"tokens":\[1\]\}$' "$($H http://x/tokenize -d '{"content":"<s>"}')"
check "parse_special false: <s> is text" '^\{"tokens":\[[0-9]+,[0-9]+' "$($H http://x/tokenize -d '{"content":"<s>","parse_special":false}')"
check "tokenize without content: 400" "'content' must be a string.* 400$" "$($H -w ' %{http_code}' http://x/tokenize -d '{}')"
check "detokenize a bad id: 400 naming it" 'tokens\[1\] is not a token id.* 400$' "$($H -w ' %{http_code}' http://x/detokenize -d '{"tokens":[1,99999]}')"
check "tokenize a bad body: 400" ' 400$' "$($H -w ' %{http_code}' http://x/tokenize -d '{nope')"
check "GET /tokenize: 405" ' 405$' "$($H -w ' %{http_code}' http://x/tokenize)"

# ---- /apply-template: what the chat endpoint feeds the model ----
msgs='[{"role":"system","content":"Be brief."},{"role":"user","content":"Tell me a story"}]'
prompt=$($H http://x/apply-template -d "{\"messages\":$msgs}")
check "apply-template renders the Jinja template" '^\{"prompt":"<\|im_start\|>system\\nBe brief.<\|im_end\|>\\n<\|im_start\|>user\\nTell me a story<\|im_end\|>\\n<\|im_start\|>assistant\\n"\}$' "$prompt"
ids=$($H http://x/tokenize -d "$(printf '%s' "$prompt" | jq -c '{content: .prompt, add_special: true}')" | jq -c .tokens)
gen=$(req "$S" "{\"id\":1,\"method\":\"chat\",\"messages\":$msgs,\"max_tokens\":1,\"return_prompt\":true}" |
      grep '"event":"done"' | grep -oE '"prompt_ids":\[[0-9,]*\]' | sed 's/"prompt_ids"://')
same "apply-template's prompt, tokenized, is the chat request's prompt" "$ids" "$gen"
check "apply-template: add_generation_prompt false" '<\|im_end\|>\\n"\}$' "$($H http://x/apply-template -d "{\"messages\":$msgs,\"add_generation_prompt\":false}")"
check "apply-template: tools not an array: 400" "'tools' must be an array.* 400$" "$($H -w ' %{http_code}' http://x/apply-template -d "{\"messages\":$msgs,\"tools\":5}")"
check "apply-template: no messages: 400" "'messages' must be an array.* 400$" "$($H -w ' %{http_code}' http://x/apply-template -d '{}')"

# ---- /props ----
$H http://x/props >"$TMP/props.json"
if jq -e --rawfile src "$QWEN" --arg model "$MODEL" '.default_generation_settings.n_ctx == 512 and
      .default_generation_settings.params.temperature == 0.8 and .total_slots >= 1 and .model_path == $model and
      .bos_token == "<s>" and .eos_token == "</s>" and .chat_template == $src and .build_info != ""' \
      "$TMP/props.json" >/dev/null; then ok "GET /props: n_ctx, params, slots, model path, BOS/EOS, the template's source"
else bad "GET /props" "$(head -c 600 "$TMP/props.json")"; fi

# ---- /metrics ----
metric() { printf '%s\n' "$2" | grep -E "^$1 " | sed -E 's/^[^ ]+ //'; }
m1=$($H http://x/metrics)
$H http://x/v1/completions -d '{"prompt":"A red bird sang","max_tokens":7,"temperature":0}' >"$TMP/c.json"
m2=$($H -D "$TMP/mh.txt" http://x/metrics)
check "metrics: Prometheus text" '^Content-Type: text/plain; version=0.0.4' "$(tr -d '\r' <"$TMP/mh.txt")"
got=$(( $(metric llamacpp:tokens_predicted_total "$m2") - $(metric llamacpp:tokens_predicted_total "$m1") ))
same "metrics: tokens_predicted_total grew by the request's tokens" "$(jq .usage.completion_tokens "$TMP/c.json")" "$got"
check "metrics: prompt_tokens_total grew" '^[1-9]' "$(( $(metric llamacpp:prompt_tokens_total "$m2") - $(metric llamacpp:prompt_tokens_total "$m1") ))"
same "metrics: one more time-to-first-token sample" "1" \
    "$(( $(metric llmchat:time_to_first_token_seconds_count "$m2") - $(metric llmchat:time_to_first_token_seconds_count "$m1") ))"
same "metrics: the +Inf bucket holds every sample" "$(metric llmchat:time_to_first_token_seconds_count "$m2")" \
    "$(metric 'llmchat:time_to_first_token_seconds_bucket\{le="\+Inf"\}' "$m2")"
for name in requests_processing requests_deferred kv_cache_usage_ratio kv_cache_tokens; do
    check "metrics: llamacpp:$name" '^[0-9.e+-]+$' "$(metric "llamacpp:$name" "$m2")"
done
check "metrics: the TPOT histogram" '^[0-9]+$' "$(metric llmchat:time_per_output_token_seconds_count "$m2")"

# ---- /slots ----
check "slots: idle" '^\[\]$' "$($H http://x/slots)"
$H -N http://x/v1/completions -d '{"prompt":"Once","max_tokens":500,"n":2,"stream":true,"seed":3}' >/dev/null &
CURL=$!
slots="[]"
i=0
while [ $i -lt 400 ] && [ "$(printf '%s' "$slots" | jq length)" != 2 ]; do
    slots=$($H http://x/slots)
    i=$((i + 1))
done
kill $CURL 2>/dev/null
wait $CURL 2>/dev/null
if printf '%s' "$slots" | jq -e 'length == 2 and .[0].id_task == .[1].id_task and ([.[].index] | sort) == [0,1] and
        all(.[]; .n_ctx == 512 and .params.n_predict == 500 and .params.seed == 3 and .n_prompt_tokens == 2 and
        (.next_token.n_decoded | type) == "number")' >/dev/null
then ok "slots: one entry per sample of a running request"
else bad "slots" "$slots"; fi

# ---- /v1/models/{id} ----
check "GET /v1/models/{id}" '^\{"id":"stories260K","object":"model"' "$($H http://x/v1/models/stories260K)"
check "GET /v1/models/{unknown}: 404 in OpenAI's shape" '^\{"error":\{"message":"The model .nope. does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"\}\} 404$' \
    "$($H -w ' %{http_code}' http://x/v1/models/nope)"

# ---- /v1/completions with a list of prompts (curl; the openai client below) ----
out=$($H http://x/v1/completions -d '{"prompt":["Once upon a time",[1,403,407]],"max_tokens":4,"temperature":0,"n":2}')
check "completions: strings and token ids in one list, 2 x 2 choices" '"index":3,' "$out"
a=$($H http://x/v1/completions -d '{"prompt":"Once upon a time","max_tokens":4,"temperature":0}' | jq -r '.choices[0].text')
same "completions: choice 1 (prompt 0, sample 1) is prompt 0's answer" "$a" "$(printf '%s' "$out" | jq -r '.choices[] | select(.index == 1) | .text')"
check "completions: a bad entry in the list: 400 naming it" 'prompt\[1\] must be a string or an array of token ids.* 400$' \
    "$($H -w ' %{http_code}' http://x/v1/completions -d '{"prompt":["a",5]}')"
check "/completion takes one prompt: 400" 'a list of 2 prompts.* 400$' "$($H -w ' %{http_code}' http://x/completion -d '{"prompt":["a","b"]}')"
# echo: the prompt's text before each choice's (a string as given, token ids decoded)
plain=$($H http://x/v1/completions -d '{"prompt":["Once upon a time",[403,407]],"max_tokens":4,"temperature":0}' | jq -r '[.choices[].text] | join("|")')
echoed=$($H http://x/v1/completions -d '{"prompt":["Once upon a time",[403,407]],"max_tokens":4,"temperature":0,"echo":true}' | jq -r '[.choices[].text] | join("|")')
same "completions: echo puts each prompt before its text" "Once upon a time${plain%%|*}|Once upon${plain#*|}" "$echoed"
streamed=$($H http://x/v1/completions -d '{"prompt":"Once upon a time","max_tokens":4,"temperature":0,"echo":true,"stream":true}' |
    sed -n 's/^data: \({.*\)/\1/p' | jq -rj '.choices[0].text')
same "completions: echo, streamed" "${echoed%%|*}" "$streamed"
check "completions: echo with logprobs: 400" "'echo' with 'logprobs'.* 400$" \
    "$($H -w ' %{http_code}' http://x/v1/completions -d '{"prompt":"a","echo":true,"logprobs":1}')"
check "chat: an image part: 400 naming it (not a 501 that clients retry)" \
    "messages\\[0\\]\\.content\\[1\\]: content parts of type 'image_url' are not supported.*invalid_request_error.* 400$" \
    "$($H -w ' %{http_code}' http://x/v1/chat/completions -d '{"messages":[{"role":"user","content":[{"type":"text","text":"What is it?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}')"
if [ -f tests/js/node_modules/openai/package.json ]; then
    (cd tests/js && node openai_extras.mjs "$PORT" stories260K) >"$TMP/js.txt" 2>&1
    while IFS= read -r line; do
        case "$line" in
            "ok   "*) ok "${line#ok   }" ;;
            "FAIL "*) bad "${line#FAIL }" ;;
            *) echo "$line" ;;
        esac
    done <"$TMP/js.txt"
    grep -q '^FAIL\|^ok' "$TMP/js.txt" || bad "openai client ran" "$(cat "$TMP/js.txt")"
else
    bad "the openai npm client is installed (make tests/js/node_modules/.package-lock.json)"
fi

# ---- CORS ----
hdr() { tr -d '\r' | grep -i "^$1:" | head -n 1 | sed -E 's/^[^:]+: //'; }
same "CORS: TCP answers allow any origin by default" "*" "$($T/health -D - -o /dev/null | hdr Access-Control-Allow-Origin)"
same "CORS: streams too" "*" "$($T/v1/completions -N -D - -o /dev/null -d '{"prompt":"a","max_tokens":2,"stream":true}' | hdr Access-Control-Allow-Origin)"
check_not "CORS: nothing on the Unix socket" 'Access-Control' "$($H -D - -o /dev/null http://x/health)"
pre=$($T/v1/chat/completions -X OPTIONS -D - -o /dev/null -H 'Origin: http://app.example' \
      -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: content-type, x-stainless-os' | tr -d '\r')
check "CORS preflight: 204" '^HTTP/1.1 204' "$pre"
check "CORS preflight: methods" '^Access-Control-Allow-Methods: .*POST' "$pre"
check "CORS preflight: Authorization, Content-Type and the headers asked" '^Access-Control-Allow-Headers: Authorization, Content-Type, content-type, x-stainless-os$' "$pre"

S2=$TMP/s2.sock
if serve "$TMP/serve2.log" -m "$MODEL" --socket "$S2" --db "" --listen 127.0.0.1:0 --api-key sekrit \
    --cors-origin "http://good.example, http://also.example" --no-metrics --no-slots; then
    P2=$(grep -oE 'tcp port [0-9]+' "$TMP/serve2.log" | grep -oE '[0-9]+$')
    T2="curl -s --max-time 20 http://127.0.0.1:$P2"
    pre=$($T2/v1/models -X OPTIONS -D - -o /dev/null -H 'Origin: http://also.example' | tr -d '\r')
    check "--cors-origin: a listed origin's preflight needs no key" '^HTTP/1.1 204' "$pre"
    check "--cors-origin: the preflight names the origin" '^Access-Control-Allow-Origin: http://also.example$' "$pre"
    check "--cors-origin: another origin's preflight: 403" '^403$' \
        "$($T2/v1/models -X OPTIONS -o /dev/null -w '%{http_code}' -H 'Origin: http://evil.example')"
    got=$($T2/v1/models -D - -o /dev/null -H 'Authorization: Bearer sekrit' -H 'Origin: http://good.example' | tr -d '\r')
    check "--cors-origin: a listed origin is named" '^Access-Control-Allow-Origin: http://good.example$' "$got"
    check "--cors-origin: Vary: Origin" '^Vary: Origin$' "$got"
    check_not "--cors-origin: another origin is not" 'Access-Control-Allow-Origin' \
        "$($T2/v1/models -D - -o /dev/null -H 'Authorization: Bearer sekrit' -H 'Origin: http://evil.example')"
    check "the API key is still needed past the preflight" '^401$' \
        "$($T2/v1/models -o /dev/null -w '%{http_code}' -H 'Origin: http://good.example')"
    check "--no-metrics: 501" 'no-metrics.* 501$' "$(curl -s --unix-socket "$S2" -w ' %{http_code}' http://x/metrics)"
    check "--no-slots: 501" 'no-slots.* 501$' "$(curl -s --unix-socket "$S2" -w ' %{http_code}' http://x/slots)"
    stop_server "$SP"
else
    bad "serve with --cors-origin starts" "$(cat "$TMP/serve2.log")"
fi

# ---- every reference chat template, through the server ----
S3=$TMP/s3.sock
for ref in "$SHARED"/reference/templates/*.json; do
    if ! serve "$TMP/serve3.log" -m "$MODEL" --socket "$S3" --db "" --chat-template-file "${ref%.json}.jinja"; then
        bad "serve with $(basename "${ref%.json}").jinja" "$(cat "$TMP/serve3.log")"
        continue
    fi
    out=$(python3 tests/tools/apply_template_check.py "$S3" "$ref" 2>&1)
    case "$out" in
        "ok   "*) ok "apply-template: ${out#ok   }" ;;
        *) bad "apply-template: $(basename "$ref")" "$out" ;;
    esac
    stop_server "$SP"
done

# ---- a hybrid model's recurrent states come out of --kv-mem ----
# qwen35.gguf keeps a 16.5 KiB state per sequence beside 256 B of KV per token.
# In 256 KiB, states take at most half (7): one snapshot (an eighth), the 4 spares
# speculation restores from, so 2 sequences run at once; the KV blocks get the
# rest (35 blocks of 16 tokens, not the 64 the whole budget would hold). Four
# samples still all finish: they take turns.
if serve "$TMP/hy.log" -m "$SHARED/models/arch/qwen35.gguf" --socket "$TMP/hy.sock" --db "" --kv-mem 256K; then
    HY="curl -s --max-time 60 --unix-socket $TMP/hy.sock"
    slots=$($HY http://x/props | jq .total_slots)
    kv=$(printf '{"id":1,"method":"status"}\n' | $C --timeout 20 "$TMP/hy.sock" | grep -oE '"kv_total":[0-9]+' | grep -oE '[0-9]+$')
    same "a hybrid under --kv-mem 256K: 2 sequences run at once, 35 KV blocks" "2 35" "$slots $kv"
    n=$($HY http://x/v1/completions -d '{"prompt":"Once","max_tokens":6,"n":4}' | jq '[.choices[] | select(.finish_reason == "length")] | length')
    same "a hybrid under --kv-mem 256K: four samples all finish" 4 "$n"
    stop_server "$SP"
else
    bad "serve a hybrid model under --kv-mem 256K" "$(cat "$TMP/hy.log")"
fi
# bench plans the same budget as serve does
got=$($LLMCHAT bench -m "$SHARED/models/arch/qwen35.gguf" -c 4 -p 8 -n 4 --kv-mem 256K --json 2>"$TMP/hyb.err" |
      jq -r '"\(.max_running) \(.kv_blocks) \(.gen_tokens)"')
same "bench on a hybrid under --kv-mem 256K: 2 at once, 35 KV blocks, all 16 tokens made" "2 35 16" "$got"

finish
