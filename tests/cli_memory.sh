# cli_memory.sh — memory at load and under trouble: `llmchat serve` on the
# default stories260K stays under 300 MB resident (VmHWM) up to ready and after
# an answer, as does a one-shot `ask --local`; a model that does not fit in the
# memory available (LLC_MEM_AVAILABLE) is refused in one line, by its weights or
# by its weights plus one context of KV cache; an allocation that fails inside
# a step (LLC_FAULT_ALLOC) is an HTTP 500 JSON error, an error chunk in a
# stream (which the official openai client raises), and the next request is
# answered. The time to ready is printed, not checked; so is the resident
# memory of a sanitized program.
. tests/lib_cli.sh
. tests/lib_server.sh
LIMIT_KB=$((300 * 1024))

# hwm_kb PID: its peak resident memory (VmHWM) in kB
hwm_kb() { grep VmHWM "/proc/$1/status" 2>/dev/null | grep -oE '[0-9]+'; }
# below NAME KB: KB < LIMIT_KB (not under a sanitizer, whose shadow memory is
# resident too: tests/run_san.sh sets LLC_TEST_SLOW)
below() {
    if [ -n "$LLC_TEST_SLOW" ]; then echo "     ($1: ${2:-?} kB, not checked under a sanitizer)"
    elif [ -n "$2" ] && [ "$2" -lt "$LIMIT_KB" ]; then ok "$1 ($2 kB)"; else bad "$1" "VmHWM ${2:-?} kB (limit $LIMIT_KB kB)"; fi
}

S=$TMP/s.sock
t0=$(date +%s%N)
if ! serve "$TMP/serve.log" -m "$MODEL" --socket "$S" --db ""; then
    bad "serve starts" "$(cat "$TMP/serve.log")"
    finish
    exit 1
fi
while ! curl -sf --max-time 5 --unix-socket "$S" http://x/health >/dev/null; do sleep 0.01; done
echo "     (serve: ready in $((($(date +%s%N) - t0) / 1000000)) ms, not checked)"
below "serve: resident memory at ready" "$(hwm_kb $SP)"
out=$(curl -s --max-time 20 --unix-socket "$S" http://x/v1/completions -d '{"prompt":"Once upon a time","max_tokens":64}')
check "serve: answers" '"finish_reason":"(length|stop)"' "$out"
below "serve: resident memory after an answer" "$(hwm_kb $SP)"
stop_server $SP

# a one-shot in-process answer: its peak, read while it runs its last step
$LLMCHAT ask --local --db "" -m "$MODEL" "Tell me a story" >"$TMP/ask.out" 2>"$TMP/ask.err" &
AP=$!
peak=0
while kill -0 $AP 2>/dev/null; do
    k=$(hwm_kb $AP)
    [ -n "$k" ] && [ "$k" -gt "$peak" ] && peak=$k
    sleep 0.01
done
wait $AP
if [ $? -eq 0 ] && [ -s "$TMP/ask.out" ]; then below "ask --local: resident memory" "$peak"
else bad "ask --local answers" "$(cat "$TMP/ask.err")"; fi

# does not fit: one line, before anything is allocated
expect_fail "serve: weights beyond the memory available, one line" 1 \
    "^llmchat: the model does not fit in memory: its weights take 1\.[0-9] MB, 0\.5 MB is available$" \
    env LLC_MEM_AVAILABLE=500K $LLMCHAT serve -m "$MODEL" --socket "$TMP/x.sock" --db ""
expect_fail "serve: weights and one context of KV beyond it, one line" 1 \
    "does not fit in memory: its weights take 1\.[0-9] MB and one 512-token context of KV cache needs 0\.3 MB, 1\.3 MB is available" \
    env LLC_MEM_AVAILABLE=1300000 $LLMCHAT serve -m "$MODEL" --socket "$TMP/x.sock" --db ""
if $LLMCHAT gen-model --preset tiny-qwen2 --type f32 -o "$TMP/big.gguf" >/dev/null 2>"$TMP/err"; then
    size=$(wc -c <"$TMP/big.gguf")
    expect_fail "ask --local: a random-weight model beyond the memory available, one line" 1 \
        "^llmchat: the model does not fit in memory: its weights take" \
        env LLC_MEM_AVAILABLE=$((size / 2)) $LLMCHAT ask --local --db "" -m "$TMP/big.gguf" "hi"
else
    bad "gen-model writes a model" "$(cat "$TMP/err")"
fi

# out of memory inside a step: the warm-up sized the buffers for 8 rows, so the
# first longer prompt grows them, and that allocation fails (once)
P="Once upon a time there was a little girl who lived in a village near the forest"
S2=$TMP/f.sock
if LLC_FAULT_ALLOC=1 serve "$TMP/f.log" -m "$MODEL" --socket "$S2" --db ""; then
    H="curl -s --max-time 20 --unix-socket $S2 -w %{http_code}"
    out=$($H http://x/v1/completions -d "{\"prompt\":\"$P\",\"max_tokens\":8}")
    check "out of memory in a step: HTTP 500 with a JSON error that says so" \
        '^\{"error":\{"code":500,"message":"out of memory for activations[^"]*","type":"server_error"\}\}500$' "$out"
    out=$($H http://x/v1/completions -d "{\"prompt\":\"$P\",\"max_tokens\":8}")
    check "out of memory in a step: the next request is answered" '"finish_reason":"length".*200$' "$out"
    out=$($H http://x/health)
    check "out of memory in a step: the server is healthy" '"ok".*200$' "$out"
    stop_server $SP
else
    bad "serve with LLC_FAULT_ALLOC starts" "$(cat "$TMP/f.log")"
fi
S3=$TMP/g.sock
if LLC_FAULT_ALLOC=1 serve "$TMP/g.log" -m "$MODEL" --socket "$S3" --db ""; then
    out=$(curl -s -N --max-time 20 --unix-socket "$S3" http://x/v1/chat/completions \
        -d "{\"messages\":[{\"role\":\"user\",\"content\":\"$P\"}],\"max_tokens\":8,\"stream\":true}")
    check "out of memory in a step: a stream gets an error chunk" \
        'data: \{"error":\{"code":500,"message":"out of memory[^"]*","type":"server_error"\}\}' "$out"
    check "out of memory in a stream: finish_reason error, then [DONE]" \
        '"finish_reason":"error".*data: \[DONE\]' "$(printf '%s' "$out" | tr -d '\n')"
    stop_server $SP
fi
# the official client raises them
if [ -f tests/js/node_modules/openai/package.json ] && command -v node >/dev/null; then
    for mode in stream plain; do
        if LLC_FAULT_ALLOC=1 serve "$TMP/j.log" -m "$MODEL" --socket "$TMP/j.sock" --db "" --listen 127.0.0.1:0; then
            PORT=$(grep -oE 'tcp port [0-9]+' "$TMP/j.log" | grep -oE '[0-9]+$')
            node tests/js/openai_error.mjs "$PORT" "$P" $mode >"$TMP/js.out" 2>&1
            while read -r line; do
                case "$line" in
                    "ok   "*) ok "${line#ok   }" ;;
                    "FAIL "*) bad "${line#FAIL }" ;;
                    *) echo "     $line" ;;
                esac
            done <"$TMP/js.out"
            grep -q "^ok   " "$TMP/js.out" || bad "openai_error.mjs ($mode) ran" "$(cat "$TMP/js.out")"
            stop_server $SP
        fi
    done
else
    bad "openai client" "tests/js/node_modules missing (make tests/js/node_modules/.package-lock.json) or no node"
fi
finish
