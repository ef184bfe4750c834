# cli_server_load.sh — the socket server under load and when clients misbehave:
# 64 concurrent greedy streams give the text each gives alone; a client that
# never reads is dropped without holding up the others; a client that hangs
# up mid-stream (NDJSON or HTTP) frees its KV blocks; cancel; an answer to a
# session cut by a hang-up is stored as cancelled; SIGTERM ends every stream
# with a `cancelled` finish and exits 0; the API key on TCP. A random-weight
# model big enough to generate slowly (tests/… gen-model) keeps streams running
# long enough to be interrupted.
. tests/lib_cli.sh
. tests/lib_server.sh

S=$TMP/s.sock
if ! serve "$TMP/serve.log" -m "$MODEL" --socket "$S" --db "$TMP/db.sqlite" --client-buffer 256K; then
    bad "serve starts" "$(cat "$TMP/serve.log")"
    finish
    exit 1
fi
FAST=$SP

# ---- 64 streams at once ----
R='{"id":1,"method":"complete","prompt":"Once upon a time","max_tokens":48,"temperature":0}'
one=$(printf '%s\n' "$R" | $C --text "$S")
t0=$(date +%s.%N)
printf '%s\n' "$R" | $C --timeout 60 --concurrent 64 "$S" >"$TMP/many.txt"
t1=$(date +%s.%N)
echo "     (64 streams of 48 tokens: $(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }") s)"
check "64 concurrent streams: all 64 answered" '^64$' "$(grep -c . "$TMP/many.txt")"
same "64 concurrent streams: each the text it gives alone" "$one" "$(sort -u "$TMP/many.txt")"
R='{"id":"c","method":"chat","messages":[{"role":"user","content":"Tell me about a dog"}],"max_tokens":40,"temperature":0}'
one=$(printf '%s\n' "$R" | $C --text "$S")
printf '%s\n' "$R" | $C --timeout 60 --concurrent 64 "$S" >"$TMP/many.txt"
check "64 concurrent chats: all 64 answered" '^64$' "$(grep -c . "$TMP/many.txt")"
same "64 concurrent chats: each the text it gives alone" "$one" "$(sort -u "$TMP/many.txt")"
out=$(req "$S" '{"id":1,"method":"status"}')
check "status after the load: nothing running, no KV in use" '"running":0,"waiting":0,"kv_used":0,' "$out"
check "status: prompt cache hits" '"prompt_cache_hit_rate":0\.[0-9]*[1-9]' "$out"

# ---- a client that never reads ----
big='{"id":1,"method":"complete","prompt":"Once upon a time","max_tokens":480,"n":8,"logprobs":20,"temperature":1}'
printf '%s\n%s\n%s\n%s\n' "$big" "$(echo "$big" | sed 's/"id":1/"id":2/')" \
    "$(echo "$big" | sed 's/"id":1/"id":3/')" "$(echo "$big" | sed 's/"id":1/"id":4/')" |
    $C --stall 15 "$S" >"$TMP/stall.txt" &
STALL=$!
sleep 1
out=$(req "$S" '{"id":1,"method":"complete","prompt":"Once upon a time","max_tokens":48,"temperature":0}')
stalled_alive=$(kill -0 $STALL 2>/dev/null && echo alive || echo gone)
check "while one client does not read, another is answered" '"id":1,"event":"done"' "$out"
# (an order, not a time: the answer is complete while the stalled client still
# holds its connection, so it did not wait for that client to go)
check "... without waiting for it (the stalled client is still connected)" '^alive$' "$stalled_alive"
wait $STALL
check "the client that never read is dropped" '^dropped after [0-9]+ bytes' "$(cat "$TMP/stall.txt")"
sleep 0.3
out=$(req "$S" '{"id":1,"method":"status"}')
check "its requests are cancelled: no KV in use" '"running":0,"waiting":0,"kv_used":0,' "$out"
check "... and it is no client any more" '"clients":1,' "$out"

# ---- a slow model, for streams that are still running when something happens ----
$LLMCHAT gen-model -o "$TMP/slow.gguf" --vocab "$MODEL" --dim 512 --layers 8 --heads 8 --kv-heads 8 \
    --ffn 1536 --ctx 1024 --type f32 >/dev/null 2>&1 || bad "gen-model for the slow model"
S2=$TMP/slow.sock
if ! serve "$TMP/slow.log" -m "$TMP/slow.gguf" --kv-mem 64M --socket "$S2" --db "$TMP/db.sqlite"; then
    bad "the slow server starts" "$(cat "$TMP/slow.log")"
    finish
    exit 1
fi
SLOW=$SP
# (the grammar never lets the answer end, so it runs to max_tokens whatever the random
# weights and the SIMD level's rounding make of it: no end-of-text before the test acts)
long='{"id":1,"method":"complete","prompt":"Once upon a time","max_tokens":600,"grammar":"root ::= [a-z ] root"}'
out=$(printf '%s\n' "$long" | $C --disconnect-after 3 "$S2")
# (one read can bring several token lines, so the client may have seen a few more)
check "a client hangs up mid-stream" 'disconnected after ([3-9]|[1-9][0-9]+) tokens' "$out"
used=x
for i in 1 2 3 4 5 6 7 8 9 10; do
    used=$(num_field kv_used "$(req "$S2" '{"id":1,"method":"status"}')")
    [ "$used" = 0 ] && break
    sleep 0.1
done
check "its KV blocks are freed" '^0$' "$used"

printf '%s\n' "$long" '{"id":2,"method":"complete","prompt":"Twice","max_tokens":600,"n":3}' | $C "$S2" >"$TMP/cancel.txt" &
CL=$!
sleep 0.5
out=$(req "$S2" '{"id":9,"method":"status"}')
check "status while streaming: running and KV in use" '"running":[1-9][0-9]*,"waiting":[0-9]+,"kv_used":[1-9]' "$out"
kill $CL 2>/dev/null
wait $CL 2>/dev/null
printf '%s\n' '{"id":"a","method":"complete","prompt":"Once","max_tokens":600}' '{"id":"b","method":"complete","prompt":"Once","max_tokens":600,"n":2}' \
    '{"id":"c","method":"cancel","request":"a"}' '{"id":"d","method":"cancel","request":"b"}' | $C --timeout 10 "$S2" >"$TMP/cancel.txt"
out=$(cat "$TMP/cancel.txt")
check "cancel: finish_reason cancelled" '"id":"a","event":"done","index":0,"finish_reason":"cancelled"' "$out"
check "cancel: every sample of n=2 ends" '"id":"b","event":"done","index":1,"finish_reason":"cancelled"' "$out"
used=x
for i in 1 2 3 4 5 6 7 8 9 10; do
    used=$(num_field kv_used "$(req "$S2" '{"id":1,"method":"status"}')")
    [ "$used" = 0 ] && break
    sleep 0.1
done
check "after cancel and hang-ups: no KV in use" '^0$' "$used"

curl -s -N --max-time 1.2 --unix-socket "$S2" http://x/v1/chat/completions \
    -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":600,"stream":true}' >"$TMP/cut.txt"
check "an HTTP stream was running" '^data: ' "$(head -n 1 "$TMP/cut.txt")"
used=x
for i in 1 2 3 4 5 6 7 8 9 10; do
    used=$(num_field kv_used "$(req "$S2" '{"id":1,"method":"status"}')")
    [ "$used" = 0 ] && break
    sleep 0.1
done
check "an HTTP client that hangs up frees its KV blocks" '^0$' "$used"
curl -s --max-time 0.5 --unix-socket "$S2" http://x/completion -d '{"prompt":"Hi","n_predict":600}' >/dev/null
used=x
for i in 1 2 3 4 5 6 7 8 9 10; do
    used=$(num_field kv_used "$(req "$S2" '{"id":1,"method":"status"}')")
    [ "$used" = 0 ] && break
    sleep 0.1
done
check "... also while it waits for a whole (non-streamed) answer" '^0$' "$used"

# a session's answer cut by a hang-up is stored, marked cancelled
sid=$(req "$S2" '{"id":1,"method":"sessions.create","title":"cut"}' | grep -oE '"session":\{"id":[0-9]+' | grep -oE '[0-9]+$')
printf '%s\n' "{\"id\":1,\"method\":\"chat\",\"session\":$sid,\"content\":\"Hello\",\"max_tokens\":600}" |
    $C --disconnect-after 4 "$S2" >/dev/null
sleep 0.3
out=$(req "$S2" "{\"id\":2,\"method\":\"sessions.get\",\"session\":$sid}")
check "a session answer cut by a hang-up is stored as cancelled" '"role":"assistant","state":"cancelled","content":"([^"\\]|\\.)+","finish":"cancelled"' "$out"

# ---- SIGTERM ends every stream with a cancelled finish ----
printf '%s\n' "$long" '{"id":2,"method":"chat","messages":[{"role":"user","content":"Hi"}],"max_tokens":600,"n":2}' |
    $C --timeout 20 "$S2" >"$TMP/term.txt" &
CL=$!
curl -s -N --max-time 20 --unix-socket "$S2" http://x/v1/completions -d '{"prompt":"Hi","max_tokens":600,"stream":true}' >"$TMP/term_sse.txt" &
CURL=$!
sleep 0.7
stop_server $SLOW
check "serve exits 0 on SIGTERM" '^0$' "$RC"
wait $CL
out=$(cat "$TMP/term.txt")
check "SIGTERM: NDJSON streams end cancelled" '"id":1,"event":"done","index":0,"finish_reason":"cancelled"' "$out"
check "SIGTERM: every sample ends cancelled" '"id":2,"event":"done","index":1,"finish_reason":"cancelled"' "$out"
wait $CURL
out=$(cat "$TMP/term_sse.txt")
check "SIGTERM: SSE streams end cancelled" '"finish_reason":"cancelled"' "$out"
check "SIGTERM: ... then data: [DONE]" '^data: \[DONE\]$' "$(grep -v '^$' "$TMP/term_sse.txt" | tail -n 1)"

# ---- TCP beyond loopback needs an API key ----
serve "$TMP/open.log" -m "$MODEL" --socket "$TMP/open.sock" --db "" --listen 0.0.0.0:0
wait $SP
check "a non-loopback --listen without --api-key is refused" 'not a loopback address: give --api-key' "$(cat "$TMP/open.log")"
if serve "$TMP/key.log" -m "$MODEL" --socket "$TMP/key.sock" --db "" --listen 0.0.0.0:0 --api-key s3cret; then
    KEYED=$SP
    PORT=$(grep -oE 'tcp port [0-9]+' "$TMP/key.log" | grep -oE '[0-9]+$')
    U="http://127.0.0.1:$PORT"
    check "no key: 401" '"type":"authentication_error".* 401$' "$(curl -s -w ' %{http_code}' "$U/v1/models")"
    check "wrong key: 401" ' 401$' "$(curl -s -w ' %{http_code}' -H 'Authorization: Bearer nope' "$U/v1/models")"
    check "the right key: 200" '"object":"list"\} 200$' "$(curl -s -w ' %{http_code}' -H 'Authorization: Bearer s3cret' "$U/v1/models")"
    check "a POST without the key: 401" ' 401$' "$(curl -s -w ' %{http_code}' "$U/completion" -d '{"prompt":"x","n_predict":2}')"
    check "a POST with the key" '"stop":true.* 200$' "$(curl -s -w ' %{http_code}' -H 'Authorization: Bearer s3cret' "$U/completion" -d '{"prompt":"x","n_predict":2}')"
    check "/health needs no key" '"status":"ok"' "$(curl -s "$U/health")"
    check "the Unix socket needs no key" ' 200$' "$(curl -s -w ' %{http_code}' --unix-socket "$TMP/key.sock" http://x/v1/models)"
    out=$(req "tcp:127.0.0.1:$PORT" '{"id":1,"method":"models"}' '{"id":2,"method":"auth","api_key":"nope"}' \
        '{"id":3,"method":"models","api_key":"s3cret"}' '{"id":4,"method":"models"}' \
        '{"id":5,"method":"auth","api_key":"s3cret"}' '{"id":6,"method":"models"}')
    check "NDJSON on TCP without the key: unauthorized" '"id":1,"event":"error","code":"unauthorized"' "$out"
    check "NDJSON: a wrong auth" '"id":2,"event":"error","code":"unauthorized"' "$out"
    check "NDJSON: the key in a request" '"id":3,"event":"result"' "$out"
    check "NDJSON: ... only for that request" '"id":4,"event":"error","code":"unauthorized"' "$out"
    check "NDJSON: auth" '"id":5,"event":"result","result":\{"ok":true\}' "$out"
    check "NDJSON: after auth" '"id":6,"event":"result"' "$out"
    stop_server $KEYED
else
    bad "serve with --api-key on 0.0.0.0" "$(cat "$TMP/key.log")"
fi

stop_server $FAST
check "serve exits 0" '^0$' "$RC"
finish
