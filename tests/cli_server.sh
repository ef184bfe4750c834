# cli_server.sh — `llmchat serve` and `llmchat ask` end to end on the real
# model: every NDJSON method, sessions stored as they stream, HTTP (OpenAI and
# llama-server endpoints) with curl over the Unix socket and over TCP including
# SSE parsing, the malformed-input suite, the socket file rules, and `ask`.
. tests/lib_cli.sh
. tests/lib_server.sh

S=$TMP/s.sock
H="curl -s --max-time 20 --unix-socket $S"
if ! serve "$TMP/serve.log" -m "$MODEL" --socket "$S" --db "$TMP/db.sqlite" --listen 127.0.0.1:0; then
    bad "serve starts" "$(cat "$TMP/serve.log")"
    finish
    exit 1
fi
MAIN=$SP
ok "serve starts"
PORT=$(grep -oE 'tcp port [0-9]+' "$TMP/serve.log" | grep -oE '[0-9]+$')
check "socket is 0600" '^600$' "$(stat -c %a "$S")"

# ---- NDJSON methods ----
out=$(req "$S" '{"id":1,"method":"models"}')
check "models" '"name":"stories260K","n_ctx":512,"n_vocab":512,"template":"raw","fim":false' "$out"
out=$(req "$S" '{"id":"st","method":"status"}')
check "status" '"id":"st","event":"result".*"kv_used":0,.*"kv_total":[0-9]+.*"tokens_per_s".*"ttft_ms":\{"p50"' "$out"

gen=$($LLMCHAT generate -m "$MODEL" -p "Once upon a time" -n 24)
txt=$(printf '%s\n' '{"id":1,"method":"complete","prompt":"Once upon a time","max_tokens":24,"temperature":0}' | $C --text "$S")
same "complete (greedy) = generate" "$gen" "$txt"
out=$(req "$S" '{"id":2,"method":"complete","prompt":"Once upon a time","max_tokens":5,"temperature":0}')
check "complete: token events with text and ids" '^\{"id":2,"event":"token","index":0,"text":",","ids":\[432\]\}' "$out"
check "complete: done with usage and timings" '"id":2,"event":"done","index":0,"finish_reason":"length","usage":\{"prompt_tokens":5,"cached_tokens":[0-9]+,"completion_tokens":5\},"timings":\{"queue_ms":' "$out"
out=$(req "$S" '{"id":3,"method":"complete","prompt":[1,403,407,261,378],"max_tokens":3,"temperature":0}')
check "complete: prompt as token ids" '"id":3,"event":"done".*"prompt_tokens":5,' "$out"
out=$(req "$S" '{"id":4,"method":"chat","messages":[{"role":"system","content":"Be kind."},{"role":"user","content":"Hi"}],"max_tokens":8,"temperature":0.9,"seed":7,"n":2,"logprobs":3}')
check "chat n=2: sample 1 streams" '"id":4,"event":"token","index":1,.*"logprobs":\[\{"id":[0-9]+,"logprob":-?[0-9.]+,"top":\[' "$out"
check "chat n=2: two done events" '"id":4,"event":"done","index":1' "$out"
check "chat n=2: two done events (0)" '"id":4,"event":"done","index":0' "$out"
out=$(req "$S" '{"id":5,"method":"chat","messages":[{"role":"user","content":"Hi"}],"max_tokens":6,"beam_width":3,"n":2}')
check "chat beam_width 3, n 2" '"id":5,"event":"done","index":1' "$out"
out=$(req "$S" '{"id":6,"method":"complete","prompt":"Once upon a time","max_tokens":40,"temperature":0,"stop":["Lily"]}')
check "stop string ends the answer" '"id":6,"event":"done","index":0,"finish_reason":"stop"' "$out"
check_not "stop string is not sent" 'Lily' "$out"
out=$(req "$S" '{"id":7,"method":"complete","prompt":"Once upon a time","max_tokens":4,"temperature":0.8,"top_k":5,"top_p":0.9,"min_p":0.1,"seed":42}')
out2=$(req "$S" '{"id":7,"method":"complete","prompt":"Once upon a time","max_tokens":4,"temperature":0.8,"top_k":5,"top_p":0.9,"min_p":0.1,"seed":42}')
same "seeded sampling repeats" "$(printf '%s' "$out" | grep '"event":"token"')" "$(printf '%s' "$out2" | grep '"event":"token"')"
out=$(req "$S" '{"id":8,"method":"infill","prefix":"def f(","suffix":"\n","extra":[{"filename":"a.py","text":"x = 1"}]}')
check "infill without FIM tokens: clear error" '"id":8,"event":"error","code":"unsupported","message":"infill is not supported by this model: its vocabulary has no fill-in-the-middle' "$out"
out=$(req "$S" '{"id":9,"method":"cancel","request":12345}')
check "cancel of an unknown request" '"id":9,"event":"error","code":"not_found"' "$out"
out=$(req "$S" '{"id":10,"method":"complete","prompt":"Once","max_tokens":400,"n":8}' '{"id":11,"method":"cancel","request":10}')
check "cancel: acknowledged" '"id":11,"event":"result","result":\{"cancelled":true\}' "$out"
check "cancel: the request ends (cancelled or already done)" '"id":10,"event":"done","index":7' "$out"
out=$(req "$S" '{"id":12,"method":"auth"}')
check "auth on the Unix socket is a no-op" '"id":12,"event":"result","result":\{"ok":true\}' "$out"

# ---- sessions ----
out=$(req "$S" '{"id":1,"method":"sessions.create","title":"notes","system_prompt":"Be brief.","params":{"temperature":0,"max_tokens":12}}')
check "sessions.create" '"id":1,"event":"result","result":\{"session":\{"id":1,"title":"notes","system_prompt":"Be brief."' "$out"
out=$(req "$S" '{"id":2,"method":"chat","session":1,"content":"Tell me a story","return_prompt":true}')
check "chat with a session streams" '"id":2,"event":"token"' "$out"
check "chat with a session: done names the stored message" '"id":2,"event":"done".*"completion_tokens":12\}.*"session":1,"message_id":2' "$out"
ptok=$(printf '%s\n' "$out" | grep '"event":"done"' | grep -oE '"prompt_ids":\[[0-9,]*\]')
answer1=$(printf '%s\n' '{"id":2,"method":"sessions.get","session":1}' | $C "$S" | $C --extract result.session.messages.1.content)
out=$(req "$S" '{"id":3,"method":"chat","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Tell me a story"}],"max_tokens":12,"temperature":0,"return_prompt":true}')
same "a session's prompt = the same conversation sent as messages" "$ptok" \
    "$(printf '%s\n' "$out" | grep '"event":"done"' | grep -oE '"prompt_ids":\[[0-9,]*\]')"
streamed=$(printf '%s\n' '{"id":3,"method":"chat","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Tell me a story"}],"max_tokens":12,"temperature":0}' | $C --text "$S")
same "the stored answer is the streamed text" "$streamed" "$answer1"
out=$(req "$S" '{"id":4,"method":"sessions.send","session":1,"content":"And then?"}')
check "sessions.send continues the session" '"id":4,"event":"done".*"cached_tokens":(1[6-9]|[2-9][0-9]),.*"session":1,"message_id":4' "$out"
out=$(req "$S" '{"id":5,"method":"sessions.get","session":1}')
check "sessions.get: the active path" '"messages":\[\{"id":1,"parent_id":0,"role":"user","state":"done","content":"Tell me a story".*\{"id":4,"parent_id":3,"role":"assistant","state":"done","content":"([^"\\]|\\.)*","finish":"length"' "$out"
out=$(req "$S" '{"id":6,"method":"sessions.list"}')
check "sessions.list" '"sessions":\[\{"id":1,"title":"notes"' "$out"
out=$(req "$S" '{"id":7,"method":"sessions.create"}' '{"id":8,"method":"sessions.delete","session":2}' '{"id":9,"method":"sessions.get","session":2}')
check "sessions.delete" '"id":8,"event":"result","result":\{"deleted":2\}' "$out"
check "a deleted session is gone" '"id":9,"event":"error","code":"not_found"' "$out"
out=$(req "$S" '{"id":10,"method":"chat","session":99,"content":"hi"}')
check "chat with a missing session" '"id":10,"event":"error","code":"not_found"' "$out"

# ---- malformed input: an error for that request, the connection stays open ----
out=$(req "$S" 'this is not json' '[1,2]' '{"method":"models"}' '{"id":1}' '{"id":2,"method":"frobnicate"}' \
    '{"id":3,"method":"complete","prompt":"x","temperature":"hot"}' '{"id":4,"method":"complete","prompt":"x","temperature":-1}' \
    '{"id":5,"method":"complete","prompt":"x","n":1000}' '{"id":6,"method":"complete","prompt":{"a":1}}' \
    '{"id":7,"method":"complete","prompt":[1,99999]}' '{"id":8,"method":"chat","messages":"hi"}' \
    '{"id":9,"method":"chat","messages":[{"role":"wizard","content":"x"}]}' '{"id":10,"method":"complete"}' \
    '{"id":11,"method":"complete","prompt":"x","stop":[1]}' '{"id":12,"method":"complete","prompt":"x","max_tokens":0}' \
    '{"id":{"a":1},"method":"models"}' '{"id":13,"method":"sessions.get","session":"one"}' \
    '{"id":14,"method":"complete","prompt":"x","top_k":1.5}' '{"id":15,"method":"complete","prompt":"","max_tokens":2}' \
    '{"id":16,"method":"models"}')
check "bad JSON" '"id":null,"event":"error","code":"bad_json"' "$out"
check "not an object" '"id":null,"event":"error","code":"bad_request","message":"a request must be a JSON object"' "$out"
check "missing id" "\"id\":null,\"event\":\"error\",\"code\":\"bad_request\",\"message\":\"'id'" "$out"
check "missing method" "\"id\":1,\"event\":\"error\",\"code\":\"bad_request\",\"message\":\"'method'" "$out"
check "unknown method" '"id":2,"event":"error","code":"unknown_method"' "$out"
check "wrong type" "\"id\":3,\"event\":\"error\",\"code\":\"bad_request\",\"message\":\"'temperature' must be a number\"" "$out"
check "out of range" '"id":4,"event":"error","code":"bad_param"' "$out"
check "n too large" '"id":5,"event":"error","code":"bad_param"' "$out"
check "prompt of the wrong type" '"id":6,"event":"error","code":"bad_request"' "$out"
check "token id outside the vocabulary" '"id":7,"event":"error","code":"bad_param"' "$out"
check "messages not an array" '"id":8,"event":"error"' "$out"
check "unknown role" '"id":9,"event":"error","code":"bad_param"' "$out"
check "missing prompt" '"id":10,"event":"error"' "$out"
check "stop of the wrong type" '"id":11,"event":"error"' "$out"
check "max_tokens 0" '"id":12,"event":"error","code":"bad_param"' "$out"
check "id of the wrong type" "\"id\":null,\"event\":\"error\",\"code\":\"bad_request\",\"message\":\"'id'" "$out"
check "session of the wrong type" '"id":13,"event":"error","code":"bad_request"' "$out"
check "non-integer top_k" '"id":14,"event":"error","code":"bad_request"' "$out"
check "empty prompt still has BOS" '"id":15,"event":"done"' "$out"
check "the connection stays open after errors" '"id":16,"event":"result"' "$out"
out=$(req "$S" '{"id":1,"method":"complete","prompt":"Once","max_tokens":200,"n":4}' '{"id":1,"method":"models"}')
check "duplicate id of a running request" '"id":1,"event":"error","code":"duplicate_id"' "$out"
i=0
while [ $i -lt 300 ]; do
    echo "{\"id\":$i,\"method\":\"complete\",\"prompt\":\"Once\",\"max_tokens\":2}"
    i=$((i + 1))
done >"$TMP/many.jsonl"
out=$($C --timeout 30 "$S" <"$TMP/many.jsonl")
check "300 requests at once on one connection: all answered" '^300$' "$(printf '%s\n' "$out" | grep -cE '"event":"(done|error)"')"
check "... beyond 256 running: too_many_requests" '"code":"too_many_requests"' "$out"
head -c 2097152 /dev/zero | tr '\0' 'a' >"$TMP/big.txt"
out=$( (printf '{"id":1,"method":"models"}\n'; cat "$TMP/big.txt"; printf '\n{"id":2,"method":"models"}\n') | $C --raw "$S")
check "a 2 MiB line: error" '"id":null,"event":"error","code":"too_large"' "$out"
check "a 2 MiB line: then the connection is closed" '^closed$' "$(printf '%s\n' "$out" | tail -n 1)"
check_not "a 2 MiB line: nothing after it is read" '"id":2' "$out"
out=$(printf '{"id":1,"method":"models"}' | $C --raw "$S")
check "a last line without its newline is answered, then the connection closes" '^\{"id":1,"event":"result".*closed$' "$(printf '%s' "$out" | tr -d '\n')"
out=$(req "$S" '{"id":1,"method":"models"}')
check "the server still answers" '"id":1,"event":"result"' "$out"

# ---- HTTP on the Unix socket ----
check "GET /health" '^\{"status":"ok"\}$' "$($H http://x/health)"
out=$($H http://x/v1/models)
check "GET /v1/models" '"data":\[\{"id":"stories260K","object":"model".*"object":"list"' "$out"
body='{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":30,"temperature":0}'
full=$($H http://x/v1/chat/completions -d "$body")
check "chat/completions" '"object":"chat.completion".*"message":\{"role":"assistant","content":".*"finish_reason":"length".*"usage":\{"prompt_tokens":[0-9]+,"completion_tokens":30' "$full"
a=$(printf '%s' "$full" | $C --extract choices.0.message.content)
$H -N http://x/v1/chat/completions -d "$(printf '%s' "$body" | sed 's/}$/,"stream":true}/')" >"$TMP/sse.txt"
b=$($C --sse choices.0.delta.content <"$TMP/sse.txt" 2>/dev/null)
same "chat/completions: SSE deltas = the whole answer" "$a" "$b"
check "chat/completions SSE ends with [DONE]" '^data: \[DONE\]$' "$(grep -v '^$' "$TMP/sse.txt" | tail -n 1)"
check "chat/completions SSE: usage in the last chunk" '"finish_reason":"length"\}\],"usage":\{"prompt_tokens"' "$(cat "$TMP/sse.txt")"
$H -N http://x/v1/chat/completions -d "$(printf '%s' "$body" | sed 's/}$/,"stream":true,"stream_options":{"include_usage":true}}/')" >"$TMP/sse2.txt"
check "stream_options.include_usage: a usage chunk" '"choices":\[\],"usage":\{"prompt_tokens"' "$(cat "$TMP/sse2.txt")"
full=$($H http://x/v1/completions -d '{"prompt":"Once upon a time","max_tokens":20,"temperature":0,"logprobs":2}')
check "v1/completions" '"object":"text_completion".*"text":", there was a little girl named Lily.*"token_logprobs":\[' "$full"
a=$(printf '%s' "$full" | $C --extract choices.0.text)
b=$($H -N http://x/v1/completions -d '{"prompt":"Once upon a time","max_tokens":20,"temperature":0,"stream":true}' | $C --sse choices.0.text 2>/dev/null)
same "v1/completions: SSE = the whole answer" "$a" "$b"
same "v1/completions = NDJSON complete" "$a" "$(printf '%s\n' '{"id":1,"method":"complete","prompt":"Once upon a time","max_tokens":20,"temperature":0}' | $C --text "$S")"
full=$($H http://x/completion -d '{"prompt":"Once upon a time","n_predict":16,"temperature":0,"cache_prompt":true,"unknown_field":[1,2]}')
check "llama /completion" '"content":", there was.*"stop":true.*"tokens_predicted":16,"tokens_evaluated":5,.*"timings":\{"prompt_n":' "$full"
a=$(printf '%s' "$full" | $C --extract content)
$H -N http://x/completion -d '{"prompt":"Once upon a time","n_predict":16,"temperature":0,"stream":true}' >"$TMP/sse3.txt"
same "llama /completion: streamed content = the whole answer" "$a" "$($C --sse content <"$TMP/sse3.txt" 2>/dev/null)"
check "llama /completion stream: chunks then a stop chunk" '"stop":false' "$(head -n 1 "$TMP/sse3.txt")"
check "llama /completion stream ends with stop:true" '"stop":true' "$(grep -v '^$' "$TMP/sse3.txt" | tail -n 1)"
out=$($H http://x/completion -d '{"prompt":"Once upon a time","n_predict":8,"temperature":0,"response_fields":["content","timings/prompt_n","tokens_cached"]}')
check "response_fields (as llama.vim asks)" '^\{"content":"[^"]*","timings/prompt_n":[0-9]+,"tokens_cached":[0-9]+\}$' "$out"
out=$($H http://x/completion -d '{"prompt":"Once upon a time","n_predict":0,"samplers":[]}')
check "n_predict 0 warms the cache and says nothing" '"content":"","id_slot":0,"stop":true,.*"tokens_predicted":0' "$out"
out=$($H -w ' %{http_code}' http://x/infill -d '{"input_prefix":"def f(","input_suffix":"\n","input_extra":[],"n_predict":8}')
check "/infill without FIM tokens: 501 and why" '"message":"infill is not supported by this model.*"type":"not_supported_error"\}\} 501$' "$out"
check "unknown path: 404" ' 404$' "$($H -w ' %{http_code}' http://x/nope)"
check "GET on a POST endpoint: 405" ' 405$' "$($H -w ' %{http_code}' http://x/v1/chat/completions)"
check "bad JSON body: 400" '"type":"invalid_request_error".* 400$' "$($H -w ' %{http_code}' http://x/completion -d '{nope')"
check "wrong type: 400" "'temperature' must be a number.* 400$" "$($H -w ' %{http_code}' http://x/completion -d '{"prompt":"x","temperature":"hot"}')"
check "missing messages: 400" ' 400$' "$($H -w ' %{http_code}' http://x/v1/chat/completions -d '{"model":"x"}')"
head -c 100000 /dev/zero | tr '\0' 'a' >"$TMP/hdr.txt"
check "a huge header: 431" '^431$' "$($H -o /dev/null -w '%{http_code}' -H "X-Big: $(cat "$TMP/hdr.txt")" http://x/health)"
head -c 9000000 /dev/zero | tr '\0' ' ' >"$TMP/body.txt"
check "a huge body: 413" '^413$' "$($H -o /dev/null -w '%{http_code}' --data-binary @"$TMP/body.txt" http://x/completion)"
check "a huge chunked body: 413" '^413$' "$($H -o /dev/null -w '%{http_code}' -H 'Transfer-Encoding: chunked' --data-binary @"$TMP/body.txt" http://x/completion)"
check "the server still answers HTTP" '"status":"ok"' "$($H http://x/health)"

# ---- TCP (--listen 127.0.0.1:0 picked a port) ----
T="curl -s --max-time 20 http://127.0.0.1:$PORT"
check "TCP: GET /health" '"status":"ok"' "$($T/health)"
a=$($T/v1/completions -d '{"prompt":"Once upon a time","max_tokens":12,"temperature":0}' | $C --extract choices.0.text)
b=$($T/v1/completions -d '{"prompt":"Once upon a time","max_tokens":12,"temperature":0,"stream":true}' | $C --sse choices.0.text 2>/dev/null)
same "TCP: SSE = the whole answer" "$a" "$b"
out=$(req "tcp:127.0.0.1:$PORT" '{"id":1,"method":"complete","prompt":"Once upon a time","max_tokens":4,"temperature":0}')
check "TCP: NDJSON without a key on loopback" '"id":1,"event":"done"' "$out"

# ---- ask ----
out=$($LLMCHAT ask --socket "$S" -n 8 --temp 0 "Tell me a story" 2>"$TMP/err")
check "ask streams an answer" '[a-zA-Z]' "$out"
out=$(printf 'Tell me a story\n' | $LLMCHAT ask --socket "$S" -n 8 --temp 0 - 2>&1)
same "ask - reads the prompt from stdin" "$($LLMCHAT ask --socket "$S" -n 8 --temp 0 "Tell me a story")" "$out"
$LLMCHAT ask --socket "$S" --session diary -n 6 "Day one" >/dev/null 2>&1
$LLMCHAT ask --socket "$S" --session diary -n 6 "Day two" >/dev/null 2>&1
out=$(req "$S" '{"id":1,"method":"sessions.list"}')
sid=$(printf '%s\n' "$out" | grep -oE '"id":[0-9]+,"title":"diary"' | grep -oE '[0-9]+' | head -n 1)
out=$(req "$S" "{\"id\":2,\"method\":\"sessions.get\",\"session\":${sid:-0}}")
check "ask --session NAME: both turns stored in one session" '"content":"Day one".*"role":"assistant".*"content":"Day two".*"role":"assistant"' "$out"
$LLMCHAT ask --socket "$S" --new -n 4 "A brand new chat about cats" >/dev/null 2>&1
check "ask --new: a session titled by its first message" '"title":"A brand new chat about cats"' "$(req "$S" '{"id":1,"method":"sessions.list"}')"
expect_fail "ask without a running llmchat" 1 "no llmchat is running on .*nobody.sock" $LLMCHAT ask --socket "$TMP/nobody.sock" hi
out=$($LLMCHAT ask --local -m "$MODEL" -n 8 --temp 0 "Tell me a story" 2>&1)
same "ask --local = ask the server" "$($LLMCHAT ask --socket "$S" -n 8 --temp 0 "Tell me a story")" "$out"
expect_fail "ask with no prompt" 2 "give a PROMPT" $LLMCHAT ask --socket "$S"

# ---- the socket file ----
serve "$TMP/second.log" -m "$MODEL" --socket "$S" --db "$TMP/db2.sqlite"
wait $SP
rc=$?
check "a live socket is never taken" "status 1: .*another llmchat is serving $S" "status $rc: $(cat "$TMP/second.log")"
check "the first server still answers" '"event":"result"' "$(req "$S" '{"id":1,"method":"models"}')"
$C --stale "$TMP/stale.sock"
if serve "$TMP/stale.log" -m "$MODEL" --socket "$TMP/stale.sock" --db ""; then
    check "a stale socket file is replaced" '"event":"result"' "$(req "$TMP/stale.sock" '{"id":1,"method":"models"}')"
    stop_server $SP
    check "serve exits 0 on SIGTERM" '^0$' "$RC"
    check "the socket file is removed at exit" '^gone$' "$([ -e "$TMP/stale.sock" ] && echo there || echo gone)"
else
    bad "a stale socket file is replaced" "$(cat "$TMP/stale.log")"
fi
printf 'not a socket' >"$TMP/file.sock"
serve "$TMP/file.log" -m "$MODEL" --socket "$TMP/file.sock" --db ""
wait $SP
check "a regular file in the way is left alone" 'exists and is not a socket' "$(cat "$TMP/file.log")"
mkdir -m 700 "$TMP/xdg"
XDG_RUNTIME_DIR="$TMP/xdg" serve "$TMP/xdg.log" -m "$MODEL" --db ""
check "default socket under XDG_RUNTIME_DIR" "on unix:$TMP/xdg/llmchat/llmchat.sock" "$(cat "$TMP/xdg.log")"
check "its directory is 0700" '^700$' "$(stat -c %a "$TMP/xdg/llmchat")"
out=$(XDG_RUNTIME_DIR="$TMP/xdg" $LLMCHAT ask -n 4 "Hi" 2>&1)
check "ask finds the default socket" "status 0" "status $? $out"
stop_server $SP

stop_server $MAIN
check "serve exits 0" '^0$' "$RC"

# ---- fill in the middle on a vocabulary that has FIM tokens (random weights) ----
$LLMCHAT gen-model -o "$TMP/fim.gguf" --vocab "$SHARED/vocab/ggml-vocab-starcoder.gguf" --dim 64 --layers 1 \
    --heads 4 --kv-heads 4 --ffn 128 --ctx 512 --type f16 --tied >/dev/null 2>&1
if serve "$TMP/fim.log" -m "$TMP/fim.gguf" --socket "$TMP/fim.sock" --db ""; then
    out=$(req "$TMP/fim.sock" '{"id":1,"method":"models"}' \
        '{"id":2,"method":"infill","prefix":"def add(a, b):\n    return ","suffix":"\n","extra":[{"filename":"u.py","text":"x = 1\n"}],"max_tokens":4,"temperature":0,"return_prompt":true}')
    check "models: fim true" '"fim":true' "$out"
    check "infill: extra context, then <fim_prefix> prefix <fim_suffix> suffix <fim_middle>" \
        '"id":2,"event":"done".*"prompt_ids":\[222,222,[0-9,]+,1,[0-9,]+,3,222,2\]' "$out"
    out=$(curl -s --max-time 20 --unix-socket "$TMP/fim.sock" http://x/infill -w ' %{http_code}' \
        -d '{"input_prefix":"def add(a, b):\n    return ","input_suffix":"\n","input_extra":[{"filename":"u.py","text":"y=2"}],"prompt":"a","n_predict":4,"temperature":0,"t_max_predict_ms":500,"samplers":["top_k","top_p","infill"]}')
    check "/infill (llama.vim's request)" '"stop":true.*"tokens_predicted":4,.*200$' "$out"
    stop_server $SP
else
    bad "serve a model with FIM tokens" "$(cat "$TMP/fim.log")"
fi

# ---- notes for a UI that shows the server's work on sessions live ----
out=$(./build/tools/srv_notes "$MODEL" "$TMP" 2>&1)
check "srv notes: session, text and done notes match the stream" '^[0-9]+ passed, 0 failed$' "$out"
finish
