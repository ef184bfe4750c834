# cli_ui_reasoning.sh — a thinking model in the chat UI, local and remote: with
# QwQ's template (the prompt opens <think>) everything the random model writes is
# reasoning, which the transcript shows as one folded line under "Assistant"; Alt-R
# (or /reasoning) unfolds it and folds it again. Remote, the same through
# `llmchat serve` with the same template (its reasoning_content). The split itself
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
    check "$1: the reasoning is one folded line" "^  > (thinking\.\.\.|reasoning) \([0-9]+ words, Alt-R or /reasoning shows it\)"
    idle
    screen >"$TMP/folded"
    n_folded=$(grep -A3 "^Assistant" "$TMP/folded" | grep -c "^    ")
    if [ "$n_folded" -eq 0 ]; then ok "$1: folded, none of its text shows"
    else bad "$1: folded, none of its text shows" "$(cat "$TMP/folded")"; fi
    keys M-r
    check "$1: Alt-R unfolds it" "^  v reasoning \([0-9]+ words, Alt-R folds it\)"
    check "$1: its text shows indented under it" "^    [^ ]"
    line "/reasoning"
    check "$1: /reasoning folds it again" "^  > reasoning \([0-9]+ words, Alt-R or /reasoning shows it\)"
}

start_cmd 100 30 "env XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$MODEL $LLMCHAT --db $TMP/local.db --no-socket --chat-template-file $QWQ"
check "local: the chat opens" "stories260K.gguf \\| cpu"
folding local
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
finish
