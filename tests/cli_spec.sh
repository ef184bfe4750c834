# cli_spec.sh — speculative decoding from the command line: with the llama2xs
# draft or n-gram drafting, greedy `generate` prints the same tokens as without;
# the JSON reports acceptance; a draft that cannot be used (missing, another
# vocabulary, bigger than the model) is one clear line and generation goes on
# without speculation; bench --draft reports acceptance too.
. tests/lib_cli.sh

DRAFT="$SHARED/models/llama2xs.gguf"
ids() { tail -n 1 | sed -E 's/.*"tokens":\[([0-9,]*)\].*/\1/'; }
for p in "Once upon a time" "The little dog" "Lily and Tom went"; do
    want=$($LLMCHAT generate -m "$MODEL" -p "$p" -n 80 --json 2>/dev/null | ids)
    got=$($LLMCHAT generate -m "$MODEL" --draft "$DRAFT" -p "$p" -n 80 --json 2>"$TMP/err" | ids)
    if [ -n "$want" ] && [ "$got" = "$want" ]; then ok "--draft: greedy tokens unchanged for '$p'"
    else bad "--draft '$p'" "want: $want" "got:  $got" "$(cat "$TMP/err")"; fi
    got=$($LLMCHAT generate -m "$MODEL" --ngram -p "$p" -n 80 --json 2>"$TMP/err" | ids)
    if [ -n "$want" ] && [ "$got" = "$want" ]; then ok "--ngram: greedy tokens unchanged for '$p'"
    else bad "--ngram '$p'" "want: $want" "got:  $got" "$(cat "$TMP/err")"; fi
done
$LLMCHAT generate -m "$MODEL" --draft "$DRAFT" -p "Once upon a time" -n 80 --json >"$TMP/j" 2>"$TMP/err"
if tail -n 1 "$TMP/j" | grep -qE '"acceptance_rate":0\.[1-9]' && tail -n 1 "$TMP/j" | grep -qE '"tokens_per_verify":[1-9]'; then
    ok "generate --draft --json reports acceptance_rate and tokens_per_verify"
else bad "acceptance in --json" "$(tail -n 1 "$TMP/j")"; fi

# drafts that cannot be used: one line, then the model alone
$LLMCHAT generate -m "$MODEL" --draft /no/such.gguf -p "Once upon a time" -n 8 >"$TMP/out" 2>"$TMP/err"
if [ $? -eq 0 ] && [ -s "$TMP/out" ] && grep -q "going on without speculation" "$TMP/err" && grep -q "No such file" "$TMP/err"
then ok "a draft that fails to load: message, then plain generation"
else bad "missing draft" "$(cat "$TMP/err")"; fi
$LLMCHAT gen-model --preset tiny-llama --vocab "$SHARED/vocab/ggml-vocab-gpt-2.gguf" --type f32 -o "$TMP/other.gguf" >/dev/null 2>&1
$LLMCHAT generate -m "$MODEL" --draft "$TMP/other.gguf" -p "Once upon a time" -n 8 >"$TMP/out" 2>"$TMP/err"
if [ $? -eq 0 ] && [ -s "$TMP/out" ] && grep -q "not the model's vocabulary" "$TMP/err"
then ok "a draft with another vocabulary is refused, the model goes on"
else bad "vocabulary mismatch" "$(cat "$TMP/err")"; fi
$LLMCHAT gen-model --vocab "$MODEL" --dim 128 --layers 6 --heads 8 --ffn 344 --type f32 -o "$TMP/big.gguf" >/dev/null 2>&1
$LLMCHAT generate -m "$MODEL" --draft "$TMP/big.gguf" -p "Once upon a time" -n 8 >"$TMP/out" 2>"$TMP/err"
if [ $? -eq 0 ] && [ -s "$TMP/out" ] && grep -q "bigger than the model" "$TMP/err"
then ok "a draft bigger than the model is refused, the model goes on"
else bad "bigger draft" "$(cat "$TMP/err")"; fi

# the server: done events and status carry the speculation figures
$LLMCHAT serve -m "$MODEL" --draft "$DRAFT" --socket "$TMP/s.sock" --db "" >/dev/null 2>&1 &
spid=$!
i=0; while [ ! -S "$TMP/s.sock" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
printf '%s\n' '{"id":1,"method":"complete","prompt":"Once upon a time","max_tokens":40,"temperature":0}' |
    ./build/tools/ndjson_client "$TMP/s.sock" >"$TMP/done" 2>&1
printf '%s\n' '{"id":2,"method":"status"}' | ./build/tools/ndjson_client "$TMP/s.sock" >"$TMP/status" 2>&1
kill $spid; wait $spid 2>/dev/null
if grep -q '"speculative":{"drafted_tokens":[1-9]' "$TMP/done" && grep -q '"acceptance_rate":0\.[1-9]' "$TMP/status"
then ok "serve --draft: done events and status report speculation"
else bad "serve --draft" "$(tail -c 300 "$TMP/done")" "$(tail -c 300 "$TMP/status")"; fi

expect_grep "bench --draft reports acceptance" '"acceptance_rate":0\.[0-9]+' \
    $LLMCHAT bench -m "$MODEL" --draft "$DRAFT" -c 4 -p 16 -n 64 --json
finish
