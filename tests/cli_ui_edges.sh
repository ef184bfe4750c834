# cli_ui_edges.sh — the chat's rough edges (issue 33), driven through tmux:
# readline keys (Alt-Backspace as ESC DEL and ESC ^H, Ctrl-W, Ctrl-C, Ctrl-D)
# and the tab keys moved off them; an input box per tab; /file; Ctrl-X Ctrl-E;
# /model listing what Ollama and Hugging Face downloaded; start-up warnings that
# stay until Esc (a second chat while a model loads, a corrupt database beside
# another warning); against a remote server (tests/tools/fake_openai): a speed
# that is tokens over time, /beam refused when typed, Ctrl-C stopping an answer
# without emptying the input.
. tests/lib_cli.sh

. tests/lib_tmux.sh
mkdir -p "$TMP/cfg"
PIDS=""

# gone PANE PATTERN: until tmux pane PANE shows no line matching PATTERN
gone() {
    i=0
    while [ $i -lt $((50 * SLOW)) ] && $T capture-pane -t "$1" -p | grep -qE -- "$2"; do
        sleep 0.1
        i=$((i + 1))
    done
    ! $T capture-pane -t "$1" -p | grep -qE -- "$2"
}

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

# /file PATH: a text file into the input, to ask about
printf 'first line\nsecond line\n' >"$TMP/notes.txt"
line "/set max_tokens 8" # (a short answer: a long one scrolls the message off the screen)
line "/file $TMP/notes.txt"
check "/file puts the file into the input as a fenced block" "^> \`\`\`notes.txt"
check "... all of it" "^  second line"
keys -l "what is this?"
keys Enter
check "Enter sends the file and the question as a message" "^You$"
check "... and empties the input" "^> *$"
if screen | grep -A6 "^You$" | grep -q "^  what is this?"; then ok "the message ends with the question"
else bad "the message ends with the question" "$(screen)"; fi
# Ctrl-X Ctrl-E: the input in $EDITOR (here a script that adds a line)
printf '#!/bin/sh\nprintf "\\nfrom the editor\\n" >>"$1"\n' >"$TMP/ed.sh"
printf '#!/bin/sh\nexit 3\n' >"$TMP/ed_fail.sh"
chmod +x "$TMP/ed.sh" "$TMP/ed_fail.sh"
line "/quit"
check "quits" "EXITED 0"
start_cmd 100 30 "env TERM=xterm-256color EDITOR=$TMP/ed.sh XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$MODEL $LLMCHAT --db $TMP/drafts.db --no-socket"
check "opens with an editor" "stories260K"
keys -l "typed here"
keys C-x C-e
check "Ctrl-X Ctrl-E brings back what the editor wrote" "^  from the editor *$"
check "... after what was typed" "^> typed here *$"
keys -l " and more"
check "the chat takes keys again after the editor" "^  from the editor and more *$"
keys C-u C-h C-u
line "/quit"
check "quits" "EXITED 0"
start_cmd 100 30 "env TERM=xterm-256color EDITOR=$TMP/ed_fail.sh XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$MODEL $LLMCHAT --db $TMP/drafts.db --no-socket"
check "opens with a failing editor" "stories260K"
keys -l "keep me"
keys C-x C-e
check "an editor that fails says so" "the editor exited with status 3: the input is as it was"
check "... and the input is kept" "^> keep me *$"
keys C-u
line "/file $TMP/nothing.txt"
check "a missing file is refused with the reason" "/file: cannot read .*nothing.txt: No such file or directory"
keys C-u
keys C-q
check "quits" "EXITED 0"

# /model lists the models other tools downloaded, by readable names: here an
# Ollama store and a Hugging Face snapshot in a made-up home (llama2xs.gguf
# linked in); /model N opens one
H=$TMP/home
XS=$(cd "$SHARED/models" && pwd)/llama2xs.gguf # (absolute: the links live elsewhere)
mkdir -p "$H/.ollama/models/blobs" "$H/.ollama/models/manifests/registry.ollama.ai/library/tiny" \
    "$H/.cache/huggingface/hub/models--someone--Tiny-GGUF/snapshots/r1"
ln -s "$XS" "$H/.ollama/models/blobs/sha256-0123abcd"
printf '{"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:0123abcd"}]}' \
    >"$H/.ollama/models/manifests/registry.ollama.ai/library/tiny/latest"
ln -s "$XS" "$H/.cache/huggingface/hub/models--someone--Tiny-GGUF/snapshots/r1/tiny-q8.gguf"
start_cmd 100 30 "env TERM=xterm-256color HOME=$H XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$MODEL $LLMCHAT --db $TMP/found.db --no-socket"
check "opens" "1:New chat"
line "/model"
check "/model lists an Ollama model by its name and tag" "^ +[0-9]+  ollama tiny:latest"
check "... and a Hugging Face download by repository and file" "^ +[0-9]+  someone/Tiny-GGUF tiny-q8.gguf"
n=$($T capture-pane -t ui -p | sed -n 's/^ *\([0-9]*\)  ollama tiny:latest.*/\1/p' | head -n 1)
line "/model $n"
check "/model N opens the Ollama model (the blob links to llama2xs.gguf here)" "llama2xs.gguf is ready"
keys C-q
check "quits" "EXITED 0"

# start-up warnings stay until Esc: a second chat on a database whose tab has
# to load its model is still warned once the model is ready
start "$TMP/two.db"
check "opens" "1:New chat"
line "/model $SHARED/models/llama2xs.gguf"
check "the tab switches model" "llama2xs.gguf is ready"
line "/set max_tokens 4"
line "Hi"
check "and answers" "^Assistant"
idle
$T new-session -d -s ui2 -x 100 -y 20 \
    "env XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$MODEL $LLMCHAT --db $TMP/two.db --no-socket; echo EXITED \$?; sleep 600"
i=0; while [ $i -lt $((100 * SLOW)) ] && ! $T capture-pane -t ui2 -p | grep -q "llama2xs.gguf is ready"; do
    sleep 0.1; i=$((i + 1)); done
if $T capture-pane -t ui2 -p | grep -q "llama2xs.gguf is ready" &&
    $T capture-pane -t ui2 -p | grep -qE "^! another llmchat chat \(pid [0-9]+\) uses this database"; then
    ok "a second chat keeps its warning after the tab's model loaded"
else bad "a second chat keeps its warning after the tab's model loaded" "$($T capture-pane -t ui2 -p)"; fi
$T send-keys -t ui2 Escape
if gone ui2 "another llmchat chat"; then ok "Esc dismisses the warning"
else bad "Esc dismisses the warning" "$($T capture-pane -t ui2 -p)"; fi
$T send-keys -t ui2 C-q
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

# two start-up warnings (a corrupt database, --listen unused): a line each, whole
head -c 8192 /dev/urandom >"$TMP/bad.db"
start_cmd 100 30 "env XDG_CONFIG_HOME=$TMP/cfg $LLMCHAT --remote http://127.0.0.1:$(cat "$TMP/port")/v1 --db $TMP/bad.db --no-socket --listen 127.0.0.1:1"
check "the corrupt database has a line of its own" "^! .*bad\\.db: not an llmchat database or it is corrupt \\(file left untouched\\)"
check "the other warning too" "^! --listen is not served with --remote"
check "and how to dismiss them" "Esc dismisses these warnings"
line "hello"
check "they stay while chatting" "^! --listen is not served"
keys Escape
if gone ui "^! "; then ok "Esc dismisses them"; else bad "Esc dismisses them" "$(screen)"; fi
keys C-q C-q
check "quits" "EXITED 0"

finish
