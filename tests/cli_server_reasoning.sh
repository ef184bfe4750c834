# cli_server_reasoning.sh — a thinking model's reasoning over /v1/chat/completions:
# with a Qwen3-style template (the model opens <think>), QwQ's (the prompt opens
# it), MiniMax-M3's <mm:think> and gpt-oss's harmony channels, an answer forced by a grammar comes back as
# message.reasoning_content and content, and streamed as delta.reasoning_content
# and delta.content; "reasoning_format": "none" in a request, or
# `serve --reasoning-format none`, leaves everything in content;
# chat_template_kwargs ({"enable_thinking": false}) reach the template; Apriel's
# reasoning (opened by its prompt) and tool calls. Splitting at
# every byte is tested in tests/test_reasoning.c.
. tests/lib_cli.sh
. tests/lib_server.sh

S=$TMP/s.sock
H="curl -s --max-time 20 --unix-socket $S"
QWEN3=$TMP/qwen3-style.jinja
cat >"$QWEN3" <<'EOF'
{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{%- endif %}
EOF

# body GBNF_TEXT [EXTRA_JSON_MEMBERS]: a chat request whose answer the grammar forces
body() {
    python3 -c '
import json, sys
b = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 300, "temperature": 0,
     "grammar": "root ::= " + json.dumps(sys.argv[1])}
b.update(json.loads(sys.argv[2]))
print(json.dumps(b))' "$1" "${2:-{\}}"
}

# split JSON_ANSWER: "reasoning|content" of a one-piece answer
split() {
    python3 -c '
import json, sys
m = json.loads(sys.stdin.read())["choices"][0]["message"]
print(json.dumps(m.get("reasoning_content")) + "|" + json.dumps(m["content"]))'
}

# split_stream SSE: the streamed deltas joined, "reasoning|content"
split_stream() {
    python3 -c '
import json, sys
r, c = "", ""
for line in sys.stdin.read().split("\n"):
    if not line.startswith("data: {"): continue
    for ch in json.loads(line[6:]).get("choices", []):
        d = ch.get("delta", {})
        r += d.get("reasoning_content") or ""
        c += d.get("content") or ""
print(json.dumps(r or None) + "|" + json.dumps(c))'
}

# obody ENDPOINT GBNF_TEXT [EXTRA_JSON]: an Ollama /api/chat or /api/generate
# request whose answer the grammar forces
obody() {
    python3 -c '
import json, sys
b = {"model": "m", "stream": False,
     "options": {"temperature": 0, "num_predict": 300, "grammar": "root ::= " + json.dumps(sys.argv[2])}}
if sys.argv[1] == "chat": b["messages"] = [{"role": "user", "content": "Hi"}]
else: b["prompt"] = "Hi"
b.update(json.loads(sys.argv[3]))
print(json.dumps(b))' "$1" "$2" "${3:-{\}}"
}
osplit() { # the answer's thinking|content (chat) or thinking|response (generate), streams joined
    python3 -c '
import json, sys
t, c = "", ""
for line in sys.stdin.read().split("\n"):
    if not line.strip(): continue
    o = json.loads(line)
    m = o.get("message", o)
    t += m.get("thinking") or ""
    c += m.get("content", m.get("response")) or ""
print(json.dumps(t or None) + "|" + json.dumps(c))'
}

# a random model with the default's vocabulary and a 4096 context, for long
# system prompts (MiniMax-M3's, gpt-oss's tools)
$LLMCHAT gen-model -o "$TMP/m4k.gguf" -m "$MODEL" --dim 64 --layers 1 --heads 2 --kv-heads 2 --ffn 128 --ctx 4096 \
    -t f32 >/dev/null 2>"$TMP/gen.err" || bad "gen-model" "$(cat "$TMP/gen.err")"

# case NAME TEMPLATE FORCED_TEXT [SERVE_ARGS...]: the answer splits into "I plan."
# and "Hello there." (one piece and streamed), and not with reasoning_format none
case_for() {
    name=$1 tmpl=$2 forced=$3
    shift 3
    if ! serve "$TMP/serve.log" --socket "$S" --db "" --chat-template-file "$tmpl" $CASE_MODEL "$@"; then
        bad "$name: serve starts" "$(cat "$TMP/serve.log")"
        return
    fi
    want='"I plan."|"Hello there."'
    whole=$(printf '%s' "$forced" | python3 -c 'import json,sys; print("null|" + json.dumps(sys.stdin.read()))')
    [ $# -gt 0 ] && want=$whole # (--reasoning-format none)
    got=$($H http://x/v1/chat/completions -d "$(body "$forced")" | split)
    same "$name: message.reasoning_content and content" "$want" "$got"
    got=$($H -N http://x/v1/chat/completions -d "$(body "$forced" '{"stream": true}')" | split_stream)
    same "$name: streamed as delta.reasoning_content and delta.content" "$want" "$got"
    got=$($H http://x/v1/chat/completions -d "$(body "$forced" '{"reasoning_format": "none"}')" | split)
    same "$name: reasoning_format none leaves it all in content" "$whole" "$got"
    if [ $# -eq 0 ]; then
        got=$($H http://x/v1/chat/completions -d "$(body "$forced")" | python3 -c '
import json, sys
u = json.load(sys.stdin)["usage"]
print(0 < u["completion_tokens_details"]["reasoning_tokens"] < u["completion_tokens"])')
        same "$name: usage.completion_tokens_details.reasoning_tokens counts the reasoning" "True" "$got"
    fi
    stop_server "$SP"
}

THINK_TEXT=$(printf '<think>\nI plan.\n</think>\n\nHello there.') # (sh has no $'...')
case_for "qwen3-style <think>" "$QWEN3" "$THINK_TEXT"
case_for "QwQ (the prompt opens <think>)" "$SHARED/reference/templates/Qwen-QwQ-32B.jinja" \
    "$(printf 'I plan.\n</think>\n\nHello there.')"
case_for "gpt-oss harmony" "$SHARED/reference/templates/openai-gpt-oss-120b.jinja" \
    '<|channel|>analysis<|message|>I plan.<|end|><|start|>assistant<|channel|>final<|message|>Hello there.'
CASE_MODEL="-m $TMP/m4k.gguf" case_for "MiniMax-M3 <mm:think>" "$SHARED/reference/templates/MiniMax-M3.jinja" \
    '<mm:think>I plan.</mm:think>Hello there.'
# MiniMax-M3 switches thinking off by thinking_mode, not enable_thinking: Ollama's
# think false (like the chat's /think off) sets both; its answer then starts after
# the bare </mm:think> the prompt ends with
if serve "$TMP/serve.log" -m "$TMP/m4k.gguf" --socket "$S" --db "" \
    --chat-template-file "$SHARED/reference/templates/MiniMax-M3.jinja"; then
    off=$($H http://x/api/chat -d "$(obody chat 'Hello there.' '{"think": false}')")
    same "MiniMax-M3: think false, no thinking" 'null|"Hello there."' "$(printf '%s' "$off" | osplit)"
    n_off=$(num_field prompt_eval_count "$off")
    n_on=$(num_field prompt_eval_count "$($H http://x/api/chat -d "$(obody chat 'Hello there.')")")
    if [ -n "$n_on" ] && [ -n "$n_off" ] && [ "$n_off" != "$n_on" ]; then
        ok "MiniMax-M3: think false reaches the template as thinking_mode ($n_off prompt tokens, $n_on without)"
    else bad "MiniMax-M3: think false reaches the template as thinking_mode" "off: $off"; fi
    # an earlier answer's reasoning_content reaches the template, which shows it (M3
    # keeps every turn's thinking): more prompt tokens than without it
    turns() {
        printf '{"messages":[{"role":"user","content":"A colour?"},{"role":"assistant","content":"Red."%s},{"role":"user","content":"Another?"}],"max_tokens":1}' "$1"
    }
    n_with=$(num_field prompt_tokens "$($H http://x/v1/chat/completions -d "$(turns ',"reasoning_content":"They want one colour."')")")
    n_without=$(num_field prompt_tokens "$($H http://x/v1/chat/completions -d "$(turns '')")")
    if [ -n "$n_with" ] && [ -n "$n_without" ] && [ "$n_with" -gt "$n_without" ]; then
        ok "an earlier answer's reasoning_content reaches the template ($n_with prompt tokens, $n_without without)"
    else bad "an earlier answer's reasoning_content reaches the template" "with $n_with, without $n_without"; fi
    out=$($H -w ' %{http_code}' http://x/v1/chat/completions -d "$(turns ',"reasoning_content":7')")
    check "a reasoning_content that is not a string is a 400" "reasoning_content must be a string.* 400$" "$out"
    stop_server "$SP"
fi
case_for "serve --reasoning-format none" "$QWEN3" "$THINK_TEXT" \
    --reasoning-format none

# The NDJSON protocol: token events carry reasoning_content apart from text (the
# ids of held markup go with the next event, none lost), done's usage counts the
# reasoning's tokens; reasoning_format none, and `complete` (a raw prompt), leave
# it all in text; a session stores it apart from the answer
# nsplit: "reasoning|text|ids in token events == completion_tokens|reasoning_tokens"
nsplit() {
    python3 -c '
import json, sys
r, t, ids, usage = "", "", 0, {}
for line in sys.stdin.read().split("\n"):
    if not line.strip(): continue
    o = json.loads(line)
    if o.get("event") == "token":
        r += o.get("reasoning_content", ""); t += o["text"]; ids += len(o["ids"])
        assert "reasoning_content" not in o or o["reasoning_content"], line
    elif o.get("event") == "done": usage = o["usage"]
    elif o.get("event") == "error": print(line)
print("%s|%s|%s|%s" % (json.dumps(r or None), json.dumps(t), ids == usage.get("completion_tokens"),
                       usage.get("reasoning_tokens")))'
}
nreq() { # METHOD GBNF_TEXT [EXTRA_JSON]
    python3 -c '
import json, sys
b = {"id": 1, "method": sys.argv[1], "max_tokens": 300, "temperature": 0,
     "grammar": "root ::= " + json.dumps(sys.argv[2])}
if sys.argv[1] == "complete": b["prompt"] = "Hi"
else: b["messages"] = [{"role": "user", "content": "Hi"}]
b.update(json.loads(sys.argv[3]))
print(json.dumps(b))' "$1" "$2" "${3:-{\}}"
}
if serve "$TMP/serve.log" --socket "$S" --db "$TMP/n.db" --chat-template-file "$QWEN3"; then
    got=$(nreq chat "$THINK_TEXT" | $C "$S" | nsplit)
    check "ndjson chat: reasoning_content apart from text, every id sent, its tokens counted" \
        '^"I plan."\|"Hello there."\|True\|[1-9][0-9]*$' "$got"
    whole=$(printf '%s' "$THINK_TEXT" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')
    got=$(nreq chat "$THINK_TEXT" '{"reasoning_format": "none"}' | $C "$S" | nsplit)
    same "ndjson chat: reasoning_format none leaves it in text" "null|$whole|True|None" "$got"
    got=$(nreq complete "$THINK_TEXT" | $C "$S" | nsplit)
    same "ndjson complete: a raw prompt's text stays whole" "null|$whole|True|None" "$got"
    sid=$(printf '%s\n' '{"id":1,"method":"sessions.create","title":"t"}' | $C "$S" | python3 -c '
import json, sys; print(json.loads(sys.stdin.readline())["result"]["session"]["id"])')
    got=$(nreq chat "$THINK_TEXT" "{\"session\": $sid}" | $C "$S" | nsplit)
    check "ndjson session chat: the same split" '^"I plan."\|"Hello there."\|True\|[1-9]' "$got"
    got=$(printf '{"id":2,"method":"sessions.get","session":%s}\n' "$sid" | $C "$S" | python3 -c '
import json, sys
m = json.loads(sys.stdin.readline())["result"]["session"]["messages"][-1]
u = m["usage"]
print("%s|%s|%s|%s" % (m["content"], m.get("reasoning_content"), u.get("reasoning_tokens", 0) > 0, u.get("reasoning_ms", 0) > 0))')
    same "ndjson sessions.get: the answer's reasoning_content, reasoning_tokens and reasoning_ms (not 0)" \
        "Hello there.|I plan.|True|True" "$got"
    stop_server "$SP"
    stored=$(python3 -c '
import sqlite3, sys
for row in sqlite3.connect(sys.argv[1]).execute(
        "SELECT content, reasoning, reasoning_tokens > 0, reasoning_ms > 0 FROM messages WHERE role = 2"):
    print("%s|%s|%d|%d" % row)' "$TMP/n.db" 2>&1)
    same "ndjson session chat: stored apart, with its token count and time" "Hello there.|I plan.|1|1" "$stored"
else
    bad "serve (ndjson) starts" "$(cat "$TMP/serve.log")"
fi

# chat_template_kwargs reach the template: enable_thinking false closes the block
# in the prompt (more prompt tokens), and the answer has no reasoning; the same for
# /apply-template; a bad reasoning_format or chat_template_kwargs is a 400
if serve "$TMP/serve.log" --socket "$S" --db "" --chat-template-file "$QWEN3"; then
    on=$($H http://x/v1/chat/completions -d "$(body 'Hello there.')")
    off=$($H http://x/v1/chat/completions -d "$(body 'Hello there.' '{"chat_template_kwargs": {"enable_thinking": false}}')")
    same "enable_thinking false: no reasoning, the answer whole" 'null|"Hello there."' "$(printf '%s' "$off" | split)"
    n_on=$(num_field prompt_tokens "$on") n_off=$(num_field prompt_tokens "$off")
    if [ -n "$n_on" ] && [ -n "$n_off" ] && [ "$n_off" -gt "$n_on" ]; then
        ok "enable_thinking false reaches the template ($n_off prompt tokens, $n_on with it on)"
    else bad "enable_thinking false reaches the template" "on: $on" "off: $off"; fi
    out=$($H http://x/apply-template -d '{"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":false}}')
    check "/apply-template takes chat_template_kwargs" '<think>\\n\\n</think>\\n\\n"}$' "$out"
    # Ollama: "thinking" beside the answer (chat and generate, one piece and
    # streamed); "think": false switches the template's thinking off
    F=$THINK_TEXT
    for ep in chat generate; do
        got=$($H http://x/api/$ep -d "$(obody $ep "$F")" | osplit)
        same "ollama /api/$ep: thinking and the answer" '"I plan."|"Hello there."' "$got"
        got=$($H -N http://x/api/$ep -d "$(obody $ep "$F" '{"stream": true}')" | osplit)
        same "ollama /api/$ep: streamed thinking and answer" '"I plan."|"Hello there."' "$got"
        off=$($H http://x/api/$ep -d "$(obody $ep 'Hello there.' '{"think": false}')")
        same "ollama /api/$ep: think false, no thinking" 'null|"Hello there."' "$(printf '%s' "$off" | osplit)"
        n_off=$(num_field prompt_eval_count "$off")
        n_on=$(num_field prompt_eval_count "$($H http://x/api/$ep -d "$(obody $ep 'Hello there.')")")
        if [ -n "$n_on" ] && [ -n "$n_off" ] && [ "$n_off" -gt "$n_on" ]; then
            ok "ollama /api/$ep: think false reaches the template ($n_off prompt tokens, $n_on without)"
        else bad "ollama /api/$ep: think false reaches the template" "off: $off"; fi
    done
    out=$($H -w ' %{http_code}' http://x/api/chat -d '{"model":"m","messages":[{"role":"user","content":"Hi"}],"think":3}')
    check "ollama: a bad think is a 400" "think.* 400$" "$out"
    out=$($H -w ' %{http_code}' http://x/v1/chat/completions -d "$(body x '{"chat_template_kwargs": "no"}')")
    check "chat_template_kwargs that is not an object is a 400" "chat_template_kwargs.* 400$" "$out"
    out=$($H -w ' %{http_code}' http://x/v1/chat/completions -d "$(body x '{"reasoning_format": "sideways"}')")
    check "a bad reasoning_format is a 400 naming it" "reasoning_format.* 400$" "$out"
    stop_server "$SP"
fi
# reasoning_effort reaches gpt-oss's template ("Reasoning: high"); its default is medium;
# Ollama's think levels are the same
if serve "$TMP/serve.log" --socket "$S" --db "" --chat-template-file "$SHARED/reference/templates/openai-gpt-oss-120b.jinja"; then
    n_of() { num_field prompt_tokens "$($H http://x/v1/chat/completions -d "$(body x "$1")")"; }
    n_def=$(n_of '{}') n_med=$(n_of '{"reasoning_effort": "medium"}') n_low=$(n_of '{"reasoning_effort": "low"}')
    n_high=$(n_of '{"chat_template_kwargs": {"reasoning_effort": "high"}}')
    if [ -n "$n_def" ] && [ "$n_def" = "$n_med" ] && [ "$n_low" != "$n_med" ] && [ "$n_high" != "$n_low" ]; then
        ok "reasoning_effort reaches the template (low $n_low, medium $n_med = default, high $n_high prompt tokens)"
    else bad "reasoning_effort reaches the template" "default $n_def medium $n_med low $n_low high $n_high"; fi
    n_olow=$(num_field prompt_eval_count "$($H http://x/api/chat -d "$(obody chat x '{"think": "low"}')")")
    same "ollama think \"low\" is reasoning_effort low" "$n_low" "$n_olow"
    out=$($H -w ' %{http_code}' http://x/v1/chat/completions -d "$(body x '{"reasoning_effort": "max"}')")
    check "a bad reasoning_effort is a 400" "reasoning_effort.* 400$" "$out"
    stop_server "$SP"
fi
# tencent Hy3's template knows only no_think/low/high and raises on anything else:
# "medium" (what OpenAI's clients send by default) asks it for "high"
if serve "$TMP/serve.log" --socket "$S" --db "" --chat-template-file "$SHARED/reference/templates/tencent-Hy3.jinja"; then
    n_of() { num_field prompt_tokens "$($H http://x/v1/chat/completions -d "$(body x "$1")")"; }
    n_med=$(n_of '{"reasoning_effort": "medium"}') n_high=$(n_of '{"reasoning_effort": "high"}')
    n_low=$(n_of '{"reasoning_effort": "low"}')
    if [ -n "$n_med" ] && [ "$n_med" = "$n_high" ] && [ -n "$n_low" ]; then
        ok "Hy3: reasoning_effort medium renders as high ($n_med prompt tokens; low $n_low)"
    else bad "Hy3: reasoning_effort medium renders as high" "medium '$n_med' high '$n_high' low '$n_low'" \
        "$($H http://x/v1/chat/completions -d "$(body x '{"reasoning_effort": "medium"}')" | head -c 300)"; fi
    stop_server "$SP"
fi
# tsplit: an answer's (one piece or streamed) "reasoning|content|call names|arguments|finish_reason"
tsplit() {
    python3 -c '
import json, sys
text = sys.stdin.read()
objs = [json.loads(l[6:]) for l in text.split("\n") if l.startswith("data: {")] or [json.loads(text)]
r, c, name, args, fin = "", "", "", "", None
for o in objs:
    for ch in o.get("choices", []):
        d = ch.get("delta") or ch.get("message") or {}
        r += d.get("reasoning_content") or ""
        c += d.get("content") or ""
        for tc in d.get("tool_calls") or []:
            f = tc.get("function", {})
            name += f.get("name") or ""
            args += f.get("arguments") or ""
        fin = ch.get("finish_reason") or fin
print("%s|%s|%s|%s|%s" % (r, c, name, args, fin))'
}
TOOL='{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}}}}}'
# call_case NAME TEMPLATE FORCED WANT [EXTRA_MEMBERS]: on m4k.gguf (tools prompts are
# long), the forced answer with the tool offered, plain and streamed, splits (tsplit)
# into WANT
call_case() {
    if ! serve "$TMP/serve.log" -m "$TMP/m4k.gguf" --socket "$S" --db "" --chat-template-file "$2"; then
        bad "$1: serve starts" "$(cat "$TMP/serve.log")"
        return
    fi
    for stream in false true; do
        got=$($H -N http://x/v1/chat/completions -d "$(body "$3" "{\"tools\": [$TOOL], \"stream\": $stream${5:+, $5}}")" | tsplit)
        same "$1 (stream $stream): reasoning, a call of get_weather, finish tool_calls" "$4" "$got"
    done
    stop_server "$SP"
}
# gpt-oss's function calls: a commentary message to=functions.NAME becomes
# tool_calls, beside the analysis as reasoning_content
call_case "gpt-oss harmony" "$SHARED/reference/templates/openai-gpt-oss-120b.jinja" \
    '<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"Paris"}<|call|>' \
    'Need weather.||get_weather|{"location":"Paris"}|tool_calls'
# ServiceNow Apriel: its prompt ends "Here are my reasoning steps:", so the answer
# starts inside the reasoning, which [BEGIN FINAL RESPONSE] ends; its calls are a
# JSON array in <tool_calls>; a call forced by tool_choice "required" is no reasoning
# (the other formats' parsers and readers: tests/test_reasoning.c, test_toolcall.c)
if serve "$TMP/serve.log" -m "$TMP/m4k.gguf" --socket "$S" --db "" \
    --chat-template-file "$SHARED/reference/templates/Apriel-1.6-15b-Thinker-fixed.jinja"; then
    F=$(printf 'Need weather.\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{"name": "get_weather", "arguments": {"location": "Paris"}}]</tool_calls>')
    got=$($H http://x/v1/chat/completions -d "$(body "$F" "{\"tools\": [$TOOL]}")" | tsplit)
    same "Apriel: reasoning, then a call in its JSON array" \
        'Need weather.||get_weather|{"location": "Paris"}|tool_calls' "$got"
    got=$($H http://x/v1/chat/completions -d "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}],
        \"max_tokens\": 200, \"temperature\": 0, \"tools\": [$TOOL], \"tool_choice\": \"required\"}" | tsplit)
    check "Apriel: tool_choice required forces a call, read as one (not as reasoning)" '^||get_weather|{.*}|tool_calls$' "$got"
    stop_server "$SP"
fi
# Kimi K3: its prompt opens <|open|>think<|sep|>, so the answer starts in the
# reasoning, which <|close|>think<|sep|> ends; the answer's own response wrapper
# dropped, a call with attributes after its name and each key (the type="string"
# of a key no schema types keeps "42" a string)
call_case "Kimi K3" "$SHARED/reference/templates/Kimi-K3.jinja" \
    'Need weather.<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="location" type="string"<|sep|>Paris<|close|>argument<|sep|><|open|>argument key="note" type="string"<|sep|>42<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>' \
    'Need weather.||get_weather|{"location": "Paris", "note": "42"}|tool_calls' '"max_tokens": 1000'
expect_fail "serve --reasoning-format sideways" 2 "--reasoning-format: 'sideways' is not auto or none" \
    $LLMCHAT serve --reasoning-format sideways
finish
