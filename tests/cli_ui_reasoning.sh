# cli_ui_reasoning.sh — a thinking model in the chat UI, local and remote: with
# QwQ's template (the prompt opens <think>) everything the random model writes is
# reasoning, which the transcript shows as one folded line under "Assistant"; Alt-R
# (or /reasoning) unfolds it and folds it again; /think off makes a template that
# opens the block close it, so the answer is text. Remote, the same through
# `llmchat serve` with the same template (its reasoning_content), and an answer
# with both reasoning and text from tests/tools/fake_openai. The split itself
# is tested in test_reasoning, storage and reloading in test_app.
. tests/lib_cli.sh
. tests/lib_server.sh
. tests/lib_tmux.sh
mkdir -p "$TMP/cfg"
QWQ="$SHARED/reference/templates/Qwen-QwQ-32B.jinja"

# folding CASE: the checks on the UI started in tmux
folding() {
    line "/set temp 0"
    line "/set max_tokens 12"
    line "Hi"
    check "$1: the reasoning is one folded line" "^  > (thinking\.\.\. [0-9.]+ s|thought for [0-9.]+ s, [0-9]+ tokens?) \(Alt-R or /reasoning shows it\)"
    check "$1: once over, it says how long and how many tokens" "^  > thought for [0-9]+\.[0-9] s, [0-9]+ tokens? \(Alt-R or /reasoning shows it\)"
    idle
    screen >"$TMP/folded"
    n_folded=$(grep -A3 "^Assistant" "$TMP/folded" | grep -c "^    ")
    if [ "$n_folded" -eq 0 ]; then ok "$1: folded, none of its text shows"
    else bad "$1: folded, none of its text shows" "$(cat "$TMP/folded")"; fi
    keys M-r
    check "$1: Alt-R unfolds it" "^  v thought for [0-9.]+ s, [0-9]+ tokens? \(Alt-R folds it\)"
    check "$1: its text shows indented under it" "^    [^ ]"
    line "/reasoning"
    check "$1: /reasoning folds it again" "^  > thought for [0-9.]+ s, [0-9]+ tokens? \(Alt-R or /reasoning shows it\)"
}

start_cmd 100 30 "env XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$MODEL $LLMCHAT --db $TMP/local.db --no-socket --chat-template-file $QWQ"
check "local: the chat opens" "stories260K.gguf \\| cpu"
folding local
keys C-q

# /think off: a template that opens <think> unless enable_thinking is false (as
# Qwen3.5's does) closes it instead, so the answer is all text, no folded line
THINK=$TMP/opens-think.jinja
cat >"$THINK" <<'EOF'
{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% else %}<think>
{% endif %}{%- endif %}
EOF
start_cmd 100 30 "env XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$MODEL $LLMCHAT --db $TMP/think.db --no-socket --chat-template-file $THINK"
check "think: the chat opens" "stories260K.gguf \\| cpu"
line "/set temp 0"
line "/set max_tokens 12"
line "Hi"
check "think on: the answer is reasoning, folded" "^  > (thinking\.\.\.|thought for) "
idle
line "/think off"
check "/think off is confirmed" "thinking off"
line "Hi again"
check "the second message is sent" "^  Hi again"
sleep 0.2
idle
screen >"$TMP/off"
at=$(grep -n "^  Hi again" "$TMP/off" | cut -d: -f1)
if [ -n "$at" ] && tail -n +"$at" "$TMP/off" | grep -A1 "^Assistant" | tail -1 | grep -qE "^  [^ >]"; then
    ok "/think off: the next answer is text, not folded"
else bad "/think off: the next answer is text, not folded" "$(cat "$TMP/off")"; fi
keys C-q

S=$TMP/s.sock
if serve "$TMP/serve.log" --socket "$S" --db "" --listen 127.0.0.1:0 --chat-template-file "$QWQ"; then
    PORT=$(grep -oE 'tcp port [0-9]+' "$TMP/serve.log" | grep -oE '[0-9]+$')
    start_cmd 100 30 "env XDG_CONFIG_HOME=$TMP/cfg $LLMCHAT --db $TMP/remote.db --no-socket --remote http://127.0.0.1:$PORT/v1"
    check "remote: the chat opens" "remote 127.0.0.1:$PORT"
    folding remote
    keys C-q
    stop_server "$SP"
else
    bad "serve starts" "$(cat "$TMP/serve.log")"
fi
# a thinking answer with both parts (the fake server streams reasoning_content,
# then content): the folded line, and the answer itself in full under it
FAKE=./build/tools/fake_openai
$FAKE "$TMP/fport" sekrit &
PIDS="$PIDS $!"
i=0; while [ ! -s "$TMP/fport" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
start_cmd 100 30 "env XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$TMP/none.gguf $LLMCHAT --remote http://127.0.0.1:$(cat "$TMP/fport")/v1 --remote-api-key sekrit --db $TMP/fake.db --no-socket"
check "both parts: the chat opens on the fake server" "remote 127\.0\.0\.1:$(cat "$TMP/fport")"
line "mode:think hi"
check "both parts: the reasoning folded" "^  > thought for [0-9.]+ s, [0-9]+ tokens? \(Alt-R or /reasoning shows it\)"
check "... and the answer in full under it" "^  Hello\.$"
keys M-r
check "... Alt-R shows the reasoning above the answer" "^    I plan a greeting\.$"
screen | grep -oE "thought for [0-9.]+ s, [0-9]+ tokens?" | head -1 >"$TMP/thought"
keys C-q
sleep 0.3
# started again on the same database: the same time and tokens, stored with the answer
start_cmd 100 30 "env XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$TMP/none.gguf $LLMCHAT --remote http://127.0.0.1:$(cat "$TMP/fport")/v1 --remote-api-key sekrit --db $TMP/fake.db --no-socket"
if [ -s "$TMP/thought" ]; then
    check "after a restart the folded line says the same" "^  > $(sed 's/\./\\./g' "$TMP/thought") \("
else bad "the folded line said how long and how many tokens" "$(cat "$TMP/thought")"; fi
keys C-q
finish
