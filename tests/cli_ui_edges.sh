# cli_ui_edges.sh — the chat's rough edges (issue 33), driven through tmux:
# readline keys (Alt-Backspace as ESC DEL and ESC ^H, Ctrl-W, Ctrl-C, Ctrl-D)
# and the tab keys moved off them; an input box per tab; against a remote server
# (tests/tools/fake_openai): a speed that is tokens over time, /beam refused
# when typed, Ctrl-C stopping an answer without emptying the input.
. tests/lib_cli.sh

. tests/lib_tmux.sh
mkdir -p "$TMP/cfg"
PIDS=""

# start DB [WIDTH HEIGHT]: the UI on the default model, in a terminal whose
# Backspace is DEL (xterm's and tmux's: curses reads it as KEY_BACKSPACE)
start() {
    start_cmd "${2:-100}" "${3:-30}" \
        "env TERM=xterm-256color XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$MODEL $LLMCHAT --db $1 --no-socket"
}

start "$TMP/keys.db"
check "opens on the default model" "stories260K.gguf \\| cpu"
keys C-t
check "Ctrl-T opens a second tab" " 2:New chat"
keys -l "one two three four"
keys M-BSpace
check "Alt-Backspace (ESC DEL) deletes the word before the cursor" "^> one two three *$"
keys Escape C-h
check "Alt-Backspace (ESC ^H) deletes the word before the cursor" "^> one two *$"
keys C-w
check "Ctrl-W deletes the word before the cursor" "^> one *$"
check "... and leaves the tab open" " 2:New chat"
keys C-c
check "Ctrl-C with no answer coming empties the input" "^> *$"
keys M-w
check "Alt-W closes the tab" "^ 1:New chat *$"
keys C-t
check "another second tab" " 2:New chat"
keys -l "x"
keys C-a C-d
check "Ctrl-D on text deletes the character under the cursor" "^> *$"
check "... and keeps the tab" " 2:New chat"
keys C-d
check "Ctrl-D on an empty input closes the tab" "^ 1:New chat *$"
keys C-d
check "Ctrl-D on an empty input in the last tab quits" "EXITED 0"

# each tab has its own input box
start "$TMP/drafts.db"
check "opens" "1:New chat"
keys -l "draft one"
keys C-t
check "a new tab starts with an empty input" "^> *$"
keys -l "draft two"
keys M-1
check "the first tab's draft comes back with it" "^> draft one *$"
keys M-2
check "and the second's with it" "^> draft two *$"
keys C-u
line "/tab 1"
check "/tab 1 shows the first tab's draft" "^> draft one *$"
keys M-2
check "the command that switched is not left in the second tab's box" "^> *$"
keys C-q
check "quits" "EXITED 0"

# a remote server
./build/tools/fake_openai "$TMP/port" &
PIDS="$PIDS $!"
i=0; while [ ! -s "$TMP/port" ] && [ $i -lt $((50 * SLOW)) ]; do sleep 0.1; i=$((i + 1)); done
start_cmd 100 30 "env XDG_CONFIG_HOME=$TMP/cfg $LLMCHAT --remote http://127.0.0.1:$(cat "$TMP/port")/v1 --db $TMP/remote.db --no-socket"
check "opens on the remote server" "remote 127\\.0\\.0\\.1:"
line "mode:burst go"
check "an answer whose pieces come in one bunch" "^  a a a a a"
idle
check "the status line's speed is tokens over time (4 tokens after the first in ~0.1 s)" "\\| [0-9]{1,2}\\.[0-9] tok/s"
line "/beam 2"
check "/beam is refused when typed in a remote tab" "beam search needs the local engine"
check "... and stays in the input" "^> /beam 2"
keys C-u
line "mode:slow go"
check "a slow answer streams" "tick tick tick"
keys -l "a draft"
keys C-c
check "Ctrl-C while an answer streams stops it" "^Assistant \\[stopped\\]"
check "... and leaves the input as it was" "^> a draft *$"
keys C-q
check "quits" "EXITED 0"

finish
