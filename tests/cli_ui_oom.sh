# cli_ui_oom.sh — the chat when the engine runs out of memory inside a step
# (LLC_FAULT_ALLOC=1: the first backend allocation after load fails, the one
# that grows the warmed-up buffers for the first longer prompt): the chat shows
# the engine's message, not a bare failure, and the next message is answered.
. tests/lib_cli.sh

. tests/lib_tmux.sh
mkdir -p "$TMP/cfg"
# send TEXT: typed, then Enter on its own (not read as part of a paste)
send() { keys -l "$1"; sleep 0.3; keys Enter; }
start_cmd 100 30 "env XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$MODEL LLC_FAULT_ALLOC=1 $LLMCHAT --db $TMP/c.db --socket $TMP/ui.sock"
check "opens on the default model" "stories260K.gguf \\| cpu"
send "/set max_tokens 16"
send "Once upon a time there was a little girl who lived in a village near the forest"
check "the failed answer says why" "the answer failed: out of memory for activations"
idle
send "Tell me a story"
wait_for "^Assistant$" 30 # (the failed answer's header says [error])
idle
screen >"$TMP/s"
if grep -A1 "^Assistant$" "$TMP/s" | tail -1 | grep -qE "^  [^ ]"; then ok "the next message is answered"
else bad "the next message is answered" "$(cat "$TMP/s")"; fi
finish
