# cli_server_tools.sh — OpenAI function calling through `llmchat serve`: tools,
# tool_choice, assistant tool_calls and tool messages are accepted and rendered
# (with the Qwen 2.5 Jinja template, the prompt is llama.cpp's byte for byte; with
# a built-in template, the generic tools prompt), bad tool fields are refused
# with a 400 naming them, and the official `openai` npm client gets valid
# answers, streaming and not. tool_choice "required" (or a named tool) enforces
# the call with a grammar, so even a random model writes one: read back as
# tool_calls, streamed as deltas; zod's integer bounds in tool parameters
# compile, what cannot be enforced is a 400; Ollama's /api/chat takes tools and
# answers message.tool_calls; the AI SDK (with zod) and ollama-js tool calling
# work unchanged (tests/js/ai_sdk.mjs, ollama_tools.mjs). With the Qwen3-Coder,
# GLM 4.6 and MiniMax-M2 templates, a forced call is written in their XML markup and read
# back with typed arguments (plain and streamed). Reading free-form
# answers is tested in tests/test_toolcall.c.
# The model is a random-weight one with the stories260K vocabulary and a 4096
# context: the tool prompts do not fit stories260K's 512 tokens.
. tests/lib_cli.sh
. tests/lib_server.sh

QWEN="$SHARED/reference/templates/Qwen-Qwen2.5-7B-Instruct"
M=$TMP/m.gguf
$LLMCHAT gen-model -o "$M" -m "$MODEL" --dim 64 --layers 1 --heads 2 --kv-heads 2 --ffn 128 --ctx 4096 -t f32 \
    >/dev/null 2>"$TMP/gen.err" || bad "gen-model" "$(cat "$TMP/gen.err")"

S=$TMP/s.sock
H="curl -s --max-time 20 --unix-socket $S"
if ! serve "$TMP/serve.log" -m "$M" --socket "$S" --db "" --listen 127.0.0.1:0 --chat-template-file "$QWEN.jinja"; then
    bad "serve starts" "$(cat "$TMP/serve.log")"
    finish
    exit 1
fi
PORT=$(grep -oE 'tcp port [0-9]+' "$TMP/serve.log" | grep -oE '[0-9]+$')

# prompt_of REQUEST_JSON: the prompt ids the server built for an NDJSON request
prompt_of() {
    printf '%s\n' "$1" | $C --timeout 20 "$S" | grep '"done"' | grep -oE '"prompt_ids":\[[0-9,]*\]'
}

# ---- the Qwen template renders tools and tool turns (llama.cpp's prompt, as tokens) ----
for case in tools_request tools_followup; do
    chat=$(python3 -c '
import json, sys
c = [c for c in json.load(open(sys.argv[1]))["cases"] if c["name"] == sys.argv[2]][0]
print(json.dumps({"id": 1, "method": "chat", "messages": c["messages"], "tools": c["tools"],
                  "max_tokens": 1, "return_prompt": True}))
print(json.dumps({"id": 2, "method": "complete", "prompt": c["prompt"], "max_tokens": 1, "return_prompt": True}))
' "$QWEN.json" "$case")
    got=$(prompt_of "$(printf '%s\n' "$chat" | head -n 1)")
    want=$(prompt_of "$(printf '%s\n' "$chat" | tail -n 1)")
    same "jinja template: $case prompt is the reference's" "$got" "$want"
done
n_ids=$(printf '%s' "$want" | grep -oE '[0-9]+' | wc -l)
body=$(python3 -c '
import json, sys
c = [c for c in json.load(open(sys.argv[1]))["cases"] if c["name"] == "tools_followup"][0]
print(json.dumps({"messages": c["messages"], "tools": c["tools"], "max_tokens": 1}))' "$QWEN.json")
out=$($H http://x/v1/chat/completions -d "$body")
check "http: tools_followup accepted with the same prompt" "\"prompt_tokens\":$n_ids," "$out"

TOOL='{"type":"function","function":{"name":"now","description":"the time","parameters":{"type":"object","properties":{}}}}'
MSGS='[{"role":"user","content":"Hi"}]'
plain=$(prompt_of "{\"id\":1,\"method\":\"chat\",\"messages\":$MSGS,\"max_tokens\":1,\"return_prompt\":true}")
with=$(prompt_of "{\"id\":1,\"method\":\"chat\",\"messages\":$MSGS,\"tools\":[$TOOL],\"max_tokens\":1,\"return_prompt\":true}")
none=$(prompt_of "{\"id\":1,\"method\":\"chat\",\"messages\":$MSGS,\"tools\":[$TOOL],\"tool_choice\":\"none\",\"max_tokens\":1,\"return_prompt\":true}")
same "tool_choice none: the tools are not offered" "$plain" "$none"
if [ -n "$with" ] && [ "$with" != "$plain" ]; then ok "tools change the prompt"; else bad "tools change the prompt" "$with"; fi

# ---- bad tool fields: 400 naming the field ----
refused() { # NAME BODY PATTERN
    out=$($H -w ' %{http_code}' http://x/v1/chat/completions -d "$2")
    check "refused: $1" "$3.* 400$" "$out"
}
refused "tools not an array" "{\"messages\":$MSGS,\"tools\":{}}" "'tools' must be an array"
refused "tool without function" "{\"messages\":$MSGS,\"tools\":[{\"type\":\"function\"}]}" "tools\\[0\\]\\.function"
refused "tool without name" "{\"messages\":$MSGS,\"tools\":[{\"type\":\"function\",\"function\":{}}]}" "tools\\[0\\]\\.function\\.name"
refused "tool_choice unknown word" "{\"messages\":$MSGS,\"tools\":[$TOOL],\"tool_choice\":\"always\"}" "'tool_choice' must be"
refused "tool_choice names no tool" "{\"messages\":$MSGS,\"tools\":[$TOOL],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"x\"}}}" "not one of 'tools'"
refused "tool_choice required without tools" "{\"messages\":$MSGS,\"tool_choice\":\"required\"}" "needs 'tools'"
refused "unknown role" "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}" "messages\\[0\\]\\.role"
refused "tool_calls not an array" "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":{}}]}" "messages\\[0\\]\\.tool_calls"
refused "tool call without name" "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":\"function\",\"function\":{\"arguments\":\"{}\"}}]}]}" "tool_calls\\[0\\]\\.function\\.name"
refused "tool message without content" "{\"messages\":[{\"role\":\"tool\",\"tool_call_id\":\"a\"}]}" "messages\\[0\\]\\.content"

# ---- streaming with tools: the same text as the answer in one piece ----
REQ="{\"messages\":$MSGS,\"tools\":[$TOOL],\"max_tokens\":12,\"seed\":7"
one=$($H http://x/v1/chat/completions -d "$REQ}" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["choices"][0]["message"]["content"]))')
streamed=$($H http://x/v1/chat/completions -d "$REQ,\"stream\":true}" | python3 -c '
import json, sys
t = ""
for l in sys.stdin:
    if l.startswith("data: {"):
        for c in json.loads(l[6:])["choices"]:
            t += c["delta"].get("content") or ""
print(json.dumps(t))')
same "stream with tools: the same content" "$one" "$streamed"

# ---- tool_choice "required" / a named tool: the call is enforced by a grammar ----
# (a random model writes a real call: the answer must be one call of an offered
# tool, arguments valid against its schema, read back as tool_calls)
WEATHER='{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Oslo"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"]}}}'
for seed in 1 2 3; do
    out=$($H http://x/v1/chat/completions -d "{\"messages\":$MSGS,\"tools\":[$TOOL,$WEATHER],\"tool_choice\":\"required\",\"max_tokens\":300,\"seed\":$seed}")
    verdict=$(printf '%s' "$out" | python3 -c '
import json, sys
c = json.load(sys.stdin)["choices"][0]
calls = c["message"].get("tool_calls") or []
ok = c["finish_reason"] == "tool_calls" and len(calls) == 1 and c["message"]["content"] is None
if ok:
    f = calls[0]["function"]; a = json.loads(f["arguments"])
    ok = (f["name"] == "now" and isinstance(a, dict)) or (f["name"] == "get_weather" and
          a.get("city") in ("Paris", "Oslo") and isinstance(a.get("days"), int) and 1 <= a["days"] <= 7)
print("valid" if ok else "invalid")' 2>&1)
    check "tool_choice required (seed $seed): one valid call of an offered tool" '^valid$' "$verdict" "$out"
done
NAMED="{\"messages\":$MSGS,\"tools\":[$TOOL,$WEATHER],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},\"max_tokens\":300,\"seed\":5"
one=$($H http://x/v1/chat/completions -d "$NAMED}" | python3 -c '
import json, sys
f = json.load(sys.stdin)["choices"][0]["message"]["tool_calls"][0]["function"]
print(f["name"], json.dumps(json.loads(f["arguments"]), sort_keys=True))')
check "named tool_choice: that tool is called" '^get_weather \{"city": "(Paris|Oslo)", "days": [1-7]\}$' "$one"
streamed=$($H http://x/v1/chat/completions -d "$NAMED,\"stream\":true}" | python3 -c '
import json, sys
name, args, finish = "", "", None
for l in sys.stdin:
    if l.startswith("data: {"):
        for c in json.loads(l[6:])["choices"]:
            for tc in c["delta"].get("tool_calls") or []:
                name += tc.get("function", {}).get("name") or ""
                args += tc.get("function", {}).get("arguments") or ""
            finish = c.get("finish_reason") or finish
print(name, json.dumps(json.loads(args), sort_keys=True), finish)')
same "named tool_choice streamed: the same call in deltas" "$one tool_calls" "$streamed"
refused "tool_choice required with response_format" \
    "{\"messages\":$MSGS,\"tools\":[$TOOL],\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}}" \
    "cannot be combined"

# ---- tool parameters as zod writes them: compiled, or a 400 naming the tool ----
ZOD_INT='{"type":"function","function":{"name":"forecast","parameters":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"days":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}},"required":["days"],"additionalProperties":false}}}'
out=$($H http://x/v1/chat/completions -d "{\"messages\":$MSGS,\"tools\":[$ZOD_INT],\"tool_choice\":\"required\",\"max_tokens\":200,\"seed\":1}")
verdict=$(printf '%s' "$out" | python3 -c '
import json, sys
c = json.load(sys.stdin)["choices"][0]; a = json.loads(c["message"]["tool_calls"][0]["function"]["arguments"])
print("valid" if list(a) == ["days"] and isinstance(a["days"], int) and abs(a["days"]) < 2**53 else "invalid")' 2>&1)
check "zod's .int() bounds in tool parameters: the arguments follow them" '^valid$' "$verdict"
refused "tool parameters that cannot be enforced (required)" \
    "{\"messages\":$MSGS,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"odd\",\"parameters\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"multipleOf\":2}}}}}],\"tool_choice\":\"required\"}" \
    "tool 'odd': 'parameters': schema.properties.n: 'multipleOf' is not supported"
# a call, then a stop string: no empty content delta before the finish
deltas=$($H http://x/v1/chat/completions -d "$NAMED,\"stream\":true,\"stop\":[\"</tool_call>\"]}" | python3 -c '
import json, sys
for l in sys.stdin:
    if l.startswith("data: {"):
        for c in json.loads(l[6:])["choices"]:
            if "content" in c["delta"] and c["delta"]["content"] is not None: print("content", json.dumps(c["delta"]["content"]))
            if c.get("finish_reason"): print("finish", c["finish_reason"])')
same "a call then a stop string: the finish with no empty content delta before it" "finish tool_calls" "$deltas"

# ---- Ollama's /api/chat with tools (tool_choice: an llmchat extension) ----
OREQ="{\"model\":\"x\",\"messages\":$MSGS,\"tools\":[$WEATHER],\"tool_choice\":\"required\",\"options\":{\"num_predict\":200,\"seed\":3}"
one=$($H http://x/api/chat -d "$OREQ,\"stream\":false}" | python3 -c '
import json, sys
m = json.load(sys.stdin)["message"]; f = m["tool_calls"][0]["function"]
print(f["name"], json.dumps(f["arguments"], sort_keys=True))')
check "ollama: /api/chat with tools: message.tool_calls, arguments an object" '^get_weather \{"city": "(Paris|Oslo)", "days": [1-7]\}$' "$one"
streamed=$($H http://x/api/chat -d "$OREQ}" | python3 -c '
import json, sys
calls = []
for l in sys.stdin:
    o = json.loads(l)  # every line is one of Ollama objects
    assert "model" in o and "message" in o, l
    calls += o["message"].get("tool_calls") or []
print(len(calls), calls[0]["function"]["name"], json.dumps(calls[0]["function"]["arguments"], sort_keys=True))' 2>&1)
same "ollama: streamed, NDJSON lines only, the same call once" "1 $one" "$streamed"

# ---- the official clients: openai, the AI SDK with zod, ollama ----
if out=$(node tests/js/openai_tools.mjs "$PORT" 2>&1); then ok "openai client: tools conversation"
else bad "openai client: tools conversation" "$out"; fi
for js in ai_sdk.mjs ollama_tools.mjs; do
    arg=$PORT
    [ $js = ollama_tools.mjs ] && arg="http://127.0.0.1:$PORT"
    out=$(timeout 120 node tests/js/$js "$arg" 2>&1)
    printf '%s\n' "$out" | sed 's/^/  js: /'
    if printf '%s\n' "$out" | grep -q '^FAIL' || ! printf '%s\n' "$out" | grep -q '^ok'; then bad "$js: every check passes"
    else ok "$js: every check passes"; fi
done
stop_server "$SP"

# ---- XML-style tool formats: tool_choice "required" writes the template's own
# markup (a grammar), read back as tool_calls with typed arguments ----
# xml_call NAME TEMPLATE_FILE: serves it, forces a call of get_weather plain and streamed
# ("NAME ARGS FINISH CONTENT" of each), and asks for what cannot be enforced
xml_call() {
    if ! serve "$TMP/xml.log" -m "$M" --socket "$S" --db "" --chat-template-file "$2"; then
        bad "serve ($1) starts" "$(cat "$TMP/xml.log")"
        return
    fi
    REQ="{\"messages\":$MSGS,\"tools\":[$TOOL,$WEATHER],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},\"max_tokens\":300,\"seed\":7"
    one=$($H http://x/v1/chat/completions -d "$REQ}" | python3 -c '
import json, sys
c = json.load(sys.stdin)["choices"][0]; f = c["message"]["tool_calls"][0]["function"]
print(f["name"], json.dumps(json.loads(f["arguments"]), sort_keys=True), c["finish_reason"], c["message"]["content"])' 2>&1)
    check "$1: a forced call in its markup, read back as tool_calls" \
        '^get_weather \{"city": "(Paris|Oslo)", "days": [1-7]\} tool_calls None$' "$one"
    streamed=$($H http://x/v1/chat/completions -d "$REQ,\"stream\":true}" | python3 -c '
import json, sys
name, args, finish, content = "", "", None, ""
for l in sys.stdin:
    if l.startswith("data: {"):
        for c in json.loads(l[6:])["choices"]:
            for tc in c["delta"].get("tool_calls") or []:
                name += tc.get("function", {}).get("name") or ""
                args += tc.get("function", {}).get("arguments") or ""
            content += c["delta"].get("content") or ""
            finish = c.get("finish_reason") or finish
print(name, json.dumps(json.loads(args), sort_keys=True), finish, content or None)' 2>&1)
    same "$1: the same call streamed in deltas" "$one" "$streamed"
    # (only the XML grammar refuses this: JSON-valued formats enforce patterns)
    PAT='{"type":"function","function":{"name":"look","parameters":{"type":"object","properties":{"q":{"type":"string","pattern":"^a+$"}}}}}'
    out=$($H -w ' %{http_code}' http://x/v1/chat/completions -d "{\"messages\":$MSGS,\"tools\":[$PAT],\"tool_choice\":\"required\"}")
    check "$1: a string's pattern cannot be enforced on raw text: 400 naming it" "tool 'look': parameter 'q': 'pattern'.* 400$" "$out"
    stop_server "$SP"
}
xml_call Qwen3-Coder "$SHARED/reference/templates/Qwen3-Coder.jinja"
xml_call GLM-4.6 "$SHARED/reference/templates/GLM-4.6.jinja"
# MiniMax-M2's template is not among the references: a small one with its markup
cat >"$TMP/minimax.jinja" <<'EOF'
{%- for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>
{% endfor %}{%- if tools %}<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>
Call tools as <minimax:tool_call>
<invoke name="NAME">
<parameter name="KEY">VALUE</parameter>
</invoke>
</minimax:tool_call>
{% endif %}<assistant>
EOF
xml_call MiniMax-M2 "$TMP/minimax.jinja"
# MiniMax-M3: every tag after the token string ]<]minimax[>[, a value's closing tag its key's
xml_call MiniMax-M3 "$SHARED/reference/templates/MiniMax-M3.jinja"

# ---- a built-in template: the generic tools prompt ----
if ! serve "$TMP/raw.log" -m "$M" --socket "$S" --db ""; then
    bad "serve (built-in template) starts" "$(cat "$TMP/raw.log")"
    finish
    exit 1
fi
SYS='# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\":\"function\",\"function\":{\"name\":\"now\",\"description\":\"the time\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>'
TURNS='{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"now","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"noon"}'
SAME='{"role":"user","content":"Hi"},{"role":"assistant","content":"<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"},{"role":"user","content":"<tool_response>\nnoon\n</tool_response>"}'
got=$(prompt_of "{\"id\":1,\"method\":\"chat\",\"messages\":[$TURNS],\"tools\":[$TOOL],\"max_tokens\":1,\"return_prompt\":true}")
want=$(prompt_of "{\"id\":1,\"method\":\"chat\",\"messages\":[{\"role\":\"system\",\"content\":\"$SYS\"},$SAME],\"max_tokens\":1,\"return_prompt\":true}")
same "built-in template: tools and tool turns as the generic prompt" "$got" "$want"
out=$($H -w ' %{http_code}' http://x/v1/chat/completions -d "{\"messages\":[$TURNS],\"tools\":[$TOOL],\"max_tokens\":2}")
check "built-in template: http answers" '"object":"chat.completion".* 200$' "$out"
stop_server "$SP"
finish
