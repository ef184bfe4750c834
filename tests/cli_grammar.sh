# cli_grammar.sh — structured output end to end on stories260K (which never
# writes JSON by itself): response_format json_schema / json_object through the
# official OpenAI client (tests/js/structured_output.mjs validates every answer
# against the schema), llama-server's grammar and json_schema fields on
# /completion, the NDJSON protocol's, max_tokens cutting JSON short (length),
# bad grammars and schemas answered 400 naming the problem, and
# `generate --json-schema / --grammar-file`.
. tests/lib_cli.sh
. tests/lib_server.sh

SCHEMA='{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120},"pet":{"enum":["cat","dog","fish"]},"happy":{"type":"boolean"},"scores":{"type":"array","items":{"type":"integer","minimum":-5,"maximum":5},"maxItems":3}},"required":["name","age","pet","happy"],"additionalProperties":false}'

S=$TMP/s.sock
H="curl -s --max-time 60 --unix-socket $S"
if ! serve "$TMP/serve.log" -m "$MODEL" --socket "$S" --db "$TMP/db.sqlite" --listen 127.0.0.1:0; then
    bad "serve starts" "$(cat "$TMP/serve.log")"
    finish
    exit 1
fi
ok "serve starts"
PORT=$(grep -oE 'tcp port [0-9]+' "$TMP/serve.log" | grep -oE '[0-9]+$')

# ---- the official OpenAI client: json_schema over seeds, streaming n=2, json_object ----
JS=tests/js/structured_output.mjs
if [ ! -f tests/js/node_modules/openai/package.json ] || ! command -v node >/dev/null; then
    bad "openai client" "tests/js/node_modules missing (make tests/js/node_modules/.package-lock.json) or no node"
    finish
    exit 1
fi
out=$(node $JS "http://127.0.0.1:$PORT/v1" "$SCHEMA" 5 2>&1)
if [ $? -eq 0 ] && ! printf '%s\n' "$out" | grep -q '^FAIL'; then
    ok "openai client: structured output ($(printf '%s\n' "$out" | grep -c '^ok') checks)"
else
    bad "openai client: structured output" "$out"
fi
# valid NAME TEXT: TEXT is JSON valid against $SCHEMA
valid() {
    v=$(printf '%s' "$2" | node $JS --validate "$SCHEMA" 2>&1)
    if [ $? -eq 0 ]; then ok "$1"; else bad "$1" "$v"; fi
}

# ---- llama-server /completion: grammar (GBNF) and json_schema ----
out=$($H http://x/completion -d '{"prompt":"Once upon a time","n_predict":20,"temperature":1,"seed":3,"grammar":"root ::= (\"yes\" | \"no\") \"!\""}')
check "/completion grammar: the text is a sentence of it" '"content":"(yes|no)!"' "$out"
check "/completion grammar: stopped by the grammar" '"stop":true' "$out"
out=$($H http://x/completion -d "{\"prompt\":\"Once upon a time\",\"n_predict\":300,\"temperature\":1,\"seed\":5,\"json_schema\":$SCHEMA}")
valid "/completion json_schema: valid against the schema" "$(printf '%s' "$out" | $C --extract content)"

# ---- NDJSON ----
out=$(req "$S" '{"id":1,"method":"complete","prompt":"Once upon a time","max_tokens":30,"temperature":0.9,"seed":2,"grammar":"root ::= [0-9]{3} \"-\" [a-c]{2}"}')
txt=$(printf '%s\n' '{"id":1,"method":"complete","prompt":"Once upon a time","max_tokens":30,"temperature":0.9,"seed":2,"grammar":"root ::= [0-9]{3} \"-\" [a-c]{2}"}' | $C --text "$S")
check "NDJSON grammar: the text matches" '^[0-9]{3}-[a-c]{2}$' "$txt"
check "NDJSON grammar: finish_reason stop" '"event":"done","index":0,"finish_reason":"stop"' "$out"
txt=$(printf '%s\n' '{"id":4,"method":"complete","prompt":"Once upon a time","max_tokens":30,"temperature":0.9,"seed":4,"logprobs":2,"grammar":"root ::= [0-9]{3} \"-\" [a-c]{2}"}' | $C --text "$S")
check "NDJSON grammar with logprobs: the text matches" '^[0-9]{3}-[a-c]{2}$' "$(printf '%s' "$txt" | tr -d '\n')"
out=$(req "$S" '{"id":2,"method":"chat","messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"response_format":{"type":"json_object"}}')
check "NDJSON response_format json_object, max_tokens 4: finish length" '"id":2,"event":"done","index":0,"finish_reason":"length"' "$out"
check "NDJSON json_object: the answer opens an object" '"id":2,"event":"token","index":0,"text":"\{' "$out"

# ---- bad input: 400 naming the problem ----
code() { $H -o "$TMP/body" -w '%{http_code}' "$@"; }
check "bad grammar: 400" '^400$' "$(code http://x/completion -d '{"prompt":"x","grammar":"root ::= [a-"}')"
check "bad grammar: where" "'grammar': grammar: line 1, column 10: unterminated character class" "$(cat "$TMP/body")"
check "undefined rule: 400" '^400$' "$(code http://x/v1/completions -d '{"prompt":"x","grammar":"root ::= item"}')"
check "undefined rule: named" "undefined rule 'item'" "$(cat "$TMP/body")"
check "unsupported schema keyword: 400" '^400$' "$(code http://x/v1/chat/completions -d '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"string","pattern":"^(?=a)"}}}}}}')"
check "unsupported schema keyword: named with its place" "response_format.json_schema.schema.*schema.properties.a: 'pattern' uses a lookahead" "$(cat "$TMP/body")"
check "unknown response_format type: 400" '^400$' "$(code http://x/v1/chat/completions -d '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"yaml"}}')"
check "grammar and response_format together: 400" '^400$' "$(code http://x/v1/completions -d '{"prompt":"x","grammar":"root ::= \"a\"","response_format":{"type":"json_object"}}')"
out=$(req "$S" '{"id":3,"method":"complete","prompt":"x","grammar":"root ::= \"a\"","beam_width":2}')
check "NDJSON grammar with beam_width: refused" '"id":3,"event":"error","code":"[a-z_]+","message":"structured output .*beam_width' "$out"
check "the server still answers" '"status":"ok"' "$($H http://x/health)"

# ---- generate ----
printf 'root ::= "The " ("cat" | "dog") " sat."\n' >"$TMP/g.gbnf"
check "generate --grammar-file" '^The (cat|dog) sat\.$' "$($LLMCHAT generate -m "$MODEL" -p 'Once upon a time' --grammar-file "$TMP/g.gbnf" 2>&1)"
valid "generate --json-schema: valid against the schema" \
    "$($LLMCHAT generate -m "$MODEL" -p "Once upon a time" -n 200 --temp 1 --seed 9 --json-schema "$SCHEMA" 2>&1)"
expect_fail "generate: a bad schema" 1 "json-schema: schema: 'multipleOf' is not supported" \
    $LLMCHAT generate -m "$MODEL" -p x --json-schema '{"type":"integer","multipleOf":2}'
expect_fail "generate: both grammar options" 1 "not both" \
    $LLMCHAT generate -m "$MODEL" -p x --json-schema '{}' --grammar-file "$TMP/g.gbnf"
finish
