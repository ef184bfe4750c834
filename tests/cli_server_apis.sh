# cli_server_apis.sh — Anthropic's Messages API (/v1/messages,
# /v1/messages/count_tokens: srv_anthropic.c) and OpenAI's Responses API
# (/v1/responses: srv_responses.c) on `llmchat serve`: the wire format with curl
# (answer shapes, errors in each API's own shape, the order of streamed events,
# count_tokens, previous_response_id, x-api-key on TCP with --api-key), then the
# official clients unchanged: @anthropic-ai/sdk (tests/js/anthropic.mjs) and
# openai's client.responses (tests/js/openai_responses.mjs), each with a tool
# call the grammar forces (tool_choice any / required).
# The model is a random-weight one with the stories260K vocabulary and a 4096
# context: the tool prompts do not fit stories260K's 512 tokens.
. tests/lib_cli.sh
. tests/lib_server.sh

M=$TMP/m.gguf
$LLMCHAT gen-model -o "$M" -m "$MODEL" --dim 64 --layers 1 --heads 2 --kv-heads 2 --ffn 128 --ctx 4096 -t f32 \
    >/dev/null 2>"$TMP/gen.err" || bad "gen-model" "$(cat "$TMP/gen.err")"
S=$TMP/s.sock
if ! serve "$TMP/serve.log" -m "$M" --socket "$S" --db "" --listen 127.0.0.1:0 --api-key sekrit; then
    bad "serve starts" "$(cat "$TMP/serve.log")"
    finish
    exit 1
fi
PORT=$(grep -oE 'tcp port [0-9]+' "$TMP/serve.log" | grep -oE '[0-9]+$')
U="curl -s --max-time 30 --unix-socket $S http://x"
T="curl -s --max-time 30 http://127.0.0.1:$PORT"
HI='[{"role":"user","content":"Hi"}]'
WEATHER='{"name":"get_weather","description":"The weather","input_schema":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Oslo"]}},"required":["city"]}}'

# ---- Anthropic: /v1/messages ----
out=$($U/v1/messages -d "{\"model\":\"x\",\"max_tokens\":6,\"messages\":$HI}")
verdict=$(printf '%s' "$out" | python3 -c '
import json, sys
m = json.load(sys.stdin)
ok = (m["id"].startswith("msg_") and m["type"] == "message" and m["role"] == "assistant" and
      m["content"][0]["type"] == "text" and m["stop_reason"] in ("end_turn", "max_tokens") and
      0 < m["usage"]["output_tokens"] <= 6 and m["usage"]["input_tokens"] > 0 and m["stop_sequence"] is None)
print("valid" if ok else "invalid")' 2>&1)
check "anthropic: a Message object (id, type, role, text block, stop_reason, usage)" '^valid$' "$verdict" "$out"

# stop_sequences: a stop string ends it with stop_reason stop_sequence
out=$($U/v1/messages -d "{\"model\":\"x\",\"max_tokens\":60,\"temperature\":0,\"stop_sequences\":[\"a\",\"e\",\"o\",\"i\"],\"messages\":$HI}")
check "anthropic: stop_sequences end it with stop_reason stop_sequence" '"stop_reason":"stop_sequence"' "$out"

# streaming: the events in Anthropic's order, each event's name its data's type
$U/v1/messages -d "{\"model\":\"x\",\"max_tokens\":5,\"stream\":true,\"messages\":$HI}" >"$TMP/a.sse"
order=$(python3 -c '
import json, sys
names, text, out = [], "", []
ev = None
for l in open(sys.argv[1]):
    l = l.rstrip("\n")
    if l.startswith("event: "): ev = l[7:]
    elif l.startswith("data: "):
        d = json.loads(l[6:]); assert d["type"] == ev, (ev, d)
        if ev == "content_block_delta": text += d["delta"]["text"]; continue
        names.append(ev)
        if ev == "message_delta": out = [d["delta"]["stop_reason"], d["usage"]["output_tokens"]]
print(" ".join(names), *out)' "$TMP/a.sse" 2>&1)
check "anthropic: streamed events in order, named as their data" \
    '^message_start ping content_block_start content_block_stop message_delta message_stop (end_turn|max_tokens) [1-5]$' "$order"

# count_tokens: the rendered prompt, the same count the answer reports
n=$($U/v1/messages/count_tokens -d "{\"model\":\"x\",\"system\":\"Be brief\",\"messages\":$HI}")
used=$($U/v1/messages -d "{\"model\":\"x\",\"max_tokens\":1,\"system\":\"Be brief\",\"messages\":$HI}" | grep -oE '"input_tokens":[0-9]+')
check "anthropic: count_tokens answers {input_tokens}" '^\{"input_tokens":[0-9]+\}$' "$n"
same "anthropic: count_tokens is the prompt the answer read" "$(printf '%s' "$n" | grep -oE '"input_tokens":[0-9]+')" "$used"
plain=$($U/v1/messages/count_tokens -d "{\"model\":\"x\",\"messages\":$HI}")
with=$($U/v1/messages/count_tokens -d "{\"model\":\"x\",\"messages\":$HI,\"tools\":[$WEATHER]}")
none=$($U/v1/messages/count_tokens -d "{\"model\":\"x\",\"messages\":$HI,\"tools\":[$WEATHER],\"tool_choice\":{\"type\":\"none\"}}")
blocks=$($U/v1/messages/count_tokens -d '{"model":"x","system":[{"type":"text","text":"Be brief"}],"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}')
same "anthropic: system and content as text blocks render as strings do" "$n" "$blocks"
same "anthropic: tool_choice none offers no tools" "$plain" "$none"
if [ "$with" != "$plain" ]; then ok "anthropic: tools reach the prompt"; else bad "anthropic: tools reach the prompt" "$with"; fi

# tool_choice tool: the grammar makes the call; stop_reason tool_use, input an object
out=$($U/v1/messages -d "{\"model\":\"x\",\"max_tokens\":200,\"messages\":$HI,\"tools\":[$WEATHER],\"tool_choice\":{\"type\":\"tool\",\"name\":\"get_weather\"}}")
check "anthropic: tool_choice tool: a tool_use block with its input" \
    '"content":\[\{"type":"tool_use","id":"toolu_[^"]+","name":"get_weather","input":\{"city":"(Paris|Oslo)"\}\}\],"stop_reason":"tool_use"' "$out"
$U/v1/messages -d "{\"model\":\"x\",\"max_tokens\":200,\"stream\":true,\"messages\":$HI,\"tools\":[$WEATHER],\"tool_choice\":{\"type\":\"any\"}}" >"$TMP/t.sse"
streamed=$(python3 -c '
import json, sys
args, start, stop = "", None, None
for l in open(sys.argv[1]):
    if not l.startswith("data: "): continue
    d = json.loads(l[6:])
    if d["type"] == "content_block_start": start = d["content_block"]
    if d["type"] == "content_block_delta": assert d["delta"]["type"] == "input_json_delta"; args += d["delta"]["partial_json"]
    if d["type"] == "message_delta": stop = d["delta"]["stop_reason"]
print(start["type"], start["name"], json.dumps(json.loads(args)), stop)' "$TMP/t.sse" 2>&1)
check "anthropic: a streamed call: tool_use block, input_json_delta pieces that parse" \
    '^tool_use get_weather \{"city": "(Paris|Oslo)"\} tool_use$' "$streamed"

# errors: 4xx in Anthropic's shape, naming what is wrong
refused() { # NAME PATH BODY STATUS PATTERN
    out=$($U$2 -w ' %{http_code}' -d "$3")
    check "anthropic refuses: $1" "^\\{\"type\":\"error\",\"error\":\\{\"type\":\"invalid_request_error\",\"message\":\".*$5.*\"\\}\\} $4\$" "$out"
}
refused "no max_tokens" /v1/messages "{\"model\":\"x\",\"messages\":$HI}" 400 "'max_tokens' is required"
refused "no model" /v1/messages "{\"max_tokens\":1,\"messages\":$HI}" 400 "'model' is required"
refused "messages not an array" /v1/messages '{"model":"x","max_tokens":1,"messages":{}}' 400 "'messages' must be a non-empty array"
refused "a system role in messages" /v1/messages '{"model":"x","max_tokens":1,"messages":[{"role":"system","content":"x"}]}' 400 \
    'messages\[0\]\.role must be \\"user\\" or \\"assistant\\"'
refused "an image block" /v1/messages '{"model":"x","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}' 400 \
    "messages\\[0\\]\\.content\\[0\\]: content blocks of type 'image' are not supported"
refused "tool_use in a user turn" /v1/messages '{"model":"x","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]}' 400 \
    "a tool_use block belongs in an assistant turn"
refused "a server tool" /v1/messages "{\"model\":\"x\",\"max_tokens\":1,\"messages\":$HI,\"tools\":[{\"type\":\"web_search_20250305\",\"name\":\"web_search\"}]}" 400 \
    "tools\\[0\\]: server tools"
refused "a tool without input_schema" /v1/messages "{\"model\":\"x\",\"max_tokens\":1,\"messages\":$HI,\"tools\":[{\"name\":\"f\"}]}" 400 \
    "tools\\[0\\]\\.input_schema"
refused "tool_choice of no shape" /v1/messages "{\"model\":\"x\",\"max_tokens\":1,\"messages\":$HI,\"tools\":[$WEATHER],\"tool_choice\":{\"type\":\"always\"}}" 400 \
    "'tool_choice' must be"
refused "tool_choice naming no tool" /v1/messages "{\"model\":\"x\",\"max_tokens\":1,\"messages\":$HI,\"tools\":[$WEATHER],\"tool_choice\":{\"type\":\"tool\",\"name\":\"x\"}}" 400 \
    "not one of 'tools'"
refused "thinking of no type" /v1/messages "{\"model\":\"x\",\"max_tokens\":1,\"messages\":$HI,\"thinking\":{\"type\":\"sometimes\"}}" 400 "'thinking' must be"
refused "stop_sequences not a list" /v1/messages "{\"model\":\"x\",\"max_tokens\":1,\"messages\":$HI,\"stop_sequences\":\"x\"}" 400 "'stop_sequences' must be an array"
refused "temperature out of range" /v1/messages "{\"model\":\"x\",\"max_tokens\":1,\"messages\":$HI,\"temperature\":-1}" 400 "'temperature' is -1"
refused "bad JSON" /v1/messages '{"model"' 400 "not valid JSON"
refused "count_tokens without messages" /v1/messages/count_tokens '{"model":"x"}' 400 "'messages' must be a non-empty array"
check "anthropic: GET is 405 in Anthropic's shape" '^\{"type":"error","error":\{"type":"invalid_request_error","message":"use POST"\}\} 405$' \
    "$($U/v1/messages -w ' %{http_code}')"

# x-api-key on TCP (--api-key): Anthropic's header, or Authorization: Bearer
check "anthropic: x-api-key is the API key" '^\{"input_tokens":[0-9]+\} 200$' \
    "$($T/v1/messages/count_tokens -w ' %{http_code}' -H 'x-api-key: sekrit' -d "{\"model\":\"x\",\"messages\":$HI}")"
check "anthropic: Authorization Bearer works too" '^\{"input_tokens":[0-9]+\} 200$' \
    "$($T/v1/messages/count_tokens -w ' %{http_code}' -H 'Authorization: Bearer sekrit' -d "{\"model\":\"x\",\"messages\":$HI}")"
check "anthropic: a wrong x-api-key is 401 in Anthropic's shape" \
    '^\{"type":"error","error":\{"type":"authentication_error","message":"invalid x-api-key"\}\} 401$' \
    "$($T/v1/messages -w ' %{http_code}' -H 'x-api-key: nope' -d '{}')"
check "x-api-key is Anthropic's header only: not a key on OpenAI's paths" ' 401$' \
    "$($T/v1/models -w ' %{http_code}' -H 'x-api-key: sekrit')"

# ---- OpenAI's Responses API: /v1/responses ----
out=$($U/v1/responses -d '{"model":"x","input":"Hi","instructions":"Be brief","max_output_tokens":4}')
verdict=$(printf '%s' "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
m = r["output"][0]; u = r["usage"]
ok = (r["id"].startswith("resp_") and r["object"] == "response" and r["status"] == "incomplete" and
      r["incomplete_details"] == {"reason": "max_output_tokens"} and r["instructions"] == "Be brief" and
      m["type"] == "message" and m["role"] == "assistant" and m["content"][0]["type"] == "output_text" and
      u["output_tokens"] == 4 and u["total_tokens"] == u["input_tokens"] + 4)
print("valid" if ok else "invalid")' 2>&1)
check "responses: a Response object (status incomplete at max_output_tokens, a message item, usage)" '^valid$' "$verdict" "$out"

# streaming: Responses' events in order, sequence numbers counting up
$U/v1/responses -d '{"model":"x","input":"Hi","max_output_tokens":3,"stream":true}' >"$TMP/r.sse"
order=$(python3 -c '
import json, sys
names, ev, seq = [], None, 0
for l in open(sys.argv[1]):
    l = l.rstrip("\n")
    if l.startswith("event: "): ev = l[7:]
    elif l.startswith("data: "):
        d = json.loads(l[6:]); assert d["type"] == ev and d["sequence_number"] == seq, (ev, seq, d)
        seq += 1
        if not names or names[-1] != ev: names.append(ev)
print(" ".join(n.replace("response.", "") for n in names))' "$TMP/r.sse" 2>&1)
same "responses: streamed events in order, numbered" \
    "created in_progress output_item.added content_part.added output_text.delta output_text.done content_part.done output_item.done incomplete" "$order"

# previous_response_id: the remembered conversation is the prompt's start
first=$($U/v1/responses -d '{"model":"x","input":"Hi","instructions":"Be brief","max_output_tokens":3,"temperature":0}')
id=$(printf '%s' "$first" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
said=$(printf '%s' "$first" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["output"][0]["content"][0]["text"]))')
cont=$($U/v1/responses -d "{\"model\":\"x\",\"input\":\"More\",\"previous_response_id\":\"$id\",\"max_output_tokens\":1}" | grep -oE '"input_tokens":[0-9]+')
full=$($U/v1/responses -d "{\"model\":\"x\",\"input\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":$said},{\"role\":\"user\",\"content\":\"More\"}],\"max_output_tokens\":1}" | grep -oE '"input_tokens":[0-9]+')
same "responses: previous_response_id continues the conversation (instructions not carried over)" "$full" "$cont"
nostore=$($U/v1/responses -d '{"model":"x","input":"Hi","max_output_tokens":1,"store":false}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
check "responses: store false is not remembered" '"code":404.*not_found|404' \
    "$($U/v1/responses -w ' %{http_code}' -d "{\"model\":\"x\",\"input\":\"x\",\"previous_response_id\":\"$nostore\",\"max_output_tokens\":1}")"
# the memory keeps the 64 most recently used: A, 63 more, then A used again; the oldest other goes
ida=$($U/v1/responses -d '{"model":"x","input":"A","max_output_tokens":1}' | grep -oE '"id":"resp_[0-9a-f]+"' | head -n 1 | cut -d'"' -f4)
i=0
while [ $i -lt 63 ]; do
    idn=$($U/v1/responses -d '{"model":"x","input":"B","max_output_tokens":1}' | grep -oE '"id":"resp_[0-9a-f]+"' | head -n 1 | cut -d'"' -f4)
    [ $i -eq 0 ] && idb=$idn
    i=$((i + 1))
done
code_of() { $U/v1/responses -o /dev/null -w '%{http_code}' -d "{\"model\":\"x\",\"input\":\"C\",\"previous_response_id\":\"$1\",\"max_output_tokens\":1}"; }
c1=$(code_of "$ida")
c2=$(code_of "$idb")
same "responses: the memory is bounded, least recently used out first" "200 404" "$c1 $c2"

# tools: a forced call is a function_call item; streamed as argument deltas
RTOOL='{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Oslo"]}},"required":["city"]}}'
out=$($U/v1/responses -d "{\"model\":\"x\",\"input\":\"Hi\",\"tools\":[$RTOOL],\"tool_choice\":{\"type\":\"function\",\"name\":\"get_weather\"},\"max_output_tokens\":200}")
call=$(printf '%s' "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin); c = [o for o in r["output"] if o["type"] == "function_call"][0]
print(c["name"], c["call_id"][:5], json.dumps(json.loads(c["arguments"])), r["status"])' 2>&1)
check "responses: a named tool_choice: a function_call item whose arguments parse" '^get_weather call_ \{"city": "(Paris|Oslo)"\} completed$' "$call"
$U/v1/responses -d "{\"model\":\"x\",\"input\":\"Hi\",\"tools\":[$RTOOL],\"tool_choice\":\"required\",\"max_output_tokens\":200,\"stream\":true}" >"$TMP/c.sse"
streamed=$(python3 -c '
import json, sys
args, done = "", None
for l in open(sys.argv[1]):
    if not l.startswith("data: "): continue
    d = json.loads(l[6:])
    if d["type"] == "response.function_call_arguments.delta": args += d["delta"]
    if d["type"] == "response.function_call_arguments.done": done = d["arguments"]
print(args == done, json.dumps(json.loads(args)))' "$TMP/c.sse" 2>&1)
check "responses: a streamed call: argument deltas, then .done with the same arguments" '^True \{"city": "(Paris|Oslo)"\}$' "$streamed"

# errors: 4xx in OpenAI's shape, naming what is wrong
rrefused() { # NAME BODY STATUS PATTERN
    out=$($U/v1/responses -w ' %{http_code}' -d "$2")
    check "responses refuse: $1" "^\\{\"error\":\\{\"code\":$3,\"message\":\".*$4.*\",\"type\":\"invalid_request_error\"\\}\\} $3\$" "$out"
}
rrefused "no input" '{"model":"x"}' 400 "'input' is required"
rrefused "input of no shape" '{"model":"x","input":5}' 400 "'input' must be a string or a non-empty array"
rrefused "an image part" '{"model":"x","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}' 400 \
    "input\\[0\\]\\.content\\[0\\]: parts of type 'input_image' are not supported"
rrefused "an unknown item" '{"model":"x","input":[{"type":"item_reference","id":"x"}]}' 400 "input\\[0\\]: items of type 'item_reference'"
rrefused "a bad role" '{"model":"x","input":[{"role":"robot","content":"x"}]}' 400 "input\\[0\\]\\.role"
rrefused "a function_call without call_id" '{"model":"x","input":[{"type":"function_call","name":"f","arguments":"{}"}]}' 400 "input\\[0\\]: a function_call is"
rrefused "a built-in tool" '{"model":"x","input":"x","tools":[{"type":"web_search"}]}' 400 "tools\\[0\\]: only function tools are supported, not 'web_search'"
rrefused "a tool without name" '{"model":"x","input":"x","tools":[{"type":"function"}]}' 400 "tools\\[0\\]\\.name"
rrefused "tool_choice naming no tool" "{\"model\":\"x\",\"input\":\"x\",\"tools\":[$RTOOL],\"tool_choice\":{\"type\":\"function\",\"name\":\"x\"}}" 400 "not one of 'tools'"
rrefused "text.format of no type" '{"model":"x","input":"x","text":{"format":{"type":"xml"}}}' 400 "'text.format.type' must be"
rrefused "a schema that cannot be enforced" '{"model":"x","input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"integer","multipleOf":3}}}}' 400 "text.format.schema"
rrefused "max_output_tokens 0" '{"model":"x","input":"x","max_output_tokens":0}' 400 "'max_output_tokens' must be a positive integer"
rrefused "top_p out of range" '{"model":"x","input":"x","top_p":2}' 400 "'top_p' is 2"
rrefused "an unknown previous_response_id" '{"model":"x","input":"x","previous_response_id":"resp_nope"}' 404 "no response 'resp_nope'"
check "responses: GET is 405" '"code":405.* 405$' "$($U/v1/responses -w ' %{http_code}')"
check "responses: the API key is asked on TCP" '"code":401.* 401$' "$($T/v1/responses -w ' %{http_code}' -d '{"input":"x"}')"

# ---- the official clients ----
for js in anthropic.mjs openai_responses.mjs; do
    out=$(timeout 120 node tests/js/$js "$PORT" sekrit 2>&1)
    printf '%s\n' "$out" | sed 's/^/  js: /'
    if printf '%s\n' "$out" | grep -q '^FAIL' || ! printf '%s\n' "$out" | grep -q '^ok'; then bad "$js: every check passes"
    else ok "$js: every check passes"; fi
done
stop_server "$SP"
finish
