# cli_ui.sh — the chat UI end to end, driven through tmux with a temporary
# database and the default model: streamed answers, two tabs, /n and /alt,
# /regen, /search, /export, quitting and finding everything again, a corrupt
# database (error shown, file untouched, chatting goes on in memory, quitting
# asks first and keeps the chat in a file), a small
# terminal, bad commands, and at 60 columns: twelve tabs, the status line,
# leaving /edit with Esc, a second chat on the same database.
. tests/lib_cli.sh

. tests/lib_tmux.sh
mkdir -p "$TMP/cfg"

# start NAME DB [WIDTH HEIGHT]: the UI on the default model
start() {
    start_cmd "${3:-100}" "${4:-30}" \
        "env XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$MODEL $LLMCHAT --db $2 --socket $TMP/ui.sock"
}

DB="$TMP/chat.db"
start ui "$DB"
check "opens on the default model" "stories260K.gguf \\| cpu"
line "/set temp 0"
line "/set max_tokens 24"
line "Once upon a time"
check "the answer streams in under the message" "^Assistant$"
check "the status line counts the tokens" "tok/s"
screen >"$TMP/s1"
if grep -A1 "^Assistant$" "$TMP/s1" | tail -1 | grep -qE "^  [^ ]"; then ok "the answer has text"
else bad "the answer has text" "$(cat "$TMP/s1")"; fi

keys C-t
check "Ctrl-T opens a second tab" " 2:New chat"
line "/set max_tokens 200"
line "/set temp 0"
line "The dog"
keys M-1
line "/set max_tokens 200"
line "Lily and Tom"
check "both tabs answered" " 1:Once upon a time .* 2:The dog"
check "the second turn reused the first from the prefix cache" "cache [1-9][0-9]*%"
keys M-2
check "Alt-2 shows the second tab" "^  The dog"
check "its answer is there" "^Assistant"

line "日本語のテスト 😀 café"
check "wide characters and emoji show as they are" "^  日本語のテスト 😀 café"
idle
printf 'first pasted line\nsecond pasted line' | $T load-buffer -
$T paste-buffer -p -t ui
check "a bracketed paste goes into the input, newlines and all" "^  second pasted line|second pasted line"
keys Enter
check "Enter sends the pasted text as one message" "^  first pasted line"
idle
line "/n 2"
line "/set temp 1"
line "/set max_tokens 16"
line "A red ball"
check "/n 2 gives two answers" "answer 1 of 2"
line "/alt"
check "/alt shows the other" "answer 2 of 2"
idle
line "/regen"
check "/regen adds two more answers (n is 2)" "answer 3 of 4"
idle
line "/edit"
check "/edit puts the last message back into the input" "^> A red ball"
keys C-u
line "A blue ball"
check "the edited message is sent as a new branch" "^  A blue ball"
idle
keys C-PPage
check "Ctrl-PgUp switches to the previous tab" "^  Lily and Tom"
keys C-NPage
check "Ctrl-PgDn switches back" "^  A blue ball"
line "/search red ball"
check "/search finds the message (the branch before the edit too)" "Search: red ball"
check "/search lists the session" "^ +1  The dog"
line "/export $TMP/out.md"
check "/export says where" "exported to"
if grep -q '\*\*User\*\*' "$TMP/out.md" 2>/dev/null && grep -q "A blue ball" "$TMP/out.md" &&
    ! grep -q "A red ball" "$TMP/out.md"; then
    ok "the export is Markdown with the messages"
else bad "the export is Markdown with the messages" "$(cat "$TMP/out.md" 2>&1 | head -20)"; fi
line "/frobnicate"
check "an unknown command is a one-line error" "unknown command '/frobnicate'"
check "a refused command stays in the input to be fixed" "^> /frobnicate"
keys C-u
line "/set temp hot"
check "a bad value is a one-line error" "not a number"
keys C-u
line "/help"
check "/help lists the keys" "Ctrl-PgUp"
keys C-q
check "Ctrl-Q quits cleanly" "EXITED 0"

start ui "$DB"
check "restart restores both tabs" " 1:Once upon a time .* 2:The dog"
check "the active tab comes back with its messages (the edited branch)" "^  A blue ball"
keys M-1
check "the first tab has its conversation" "^  Once upon a time"
line "/sessions"
check "/sessions lists both" "^ +2  "
# the UI serves the socket: a shell continues a session and the tab shows it live
i=0; while [ ! -S "$TMP/ui.sock" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
$LLMCHAT ask --socket "$TMP/ui.sock" "Hello from the shell" >"$TMP/ask1" 2>"$TMP/askerr"
if [ $? -eq 0 ] && [ -s "$TMP/ask1" ]; then ok "llmchat ask works while the UI runs"
else bad "ask while the UI runs" "$(cat "$TMP/askerr")"; fi
$LLMCHAT ask --socket "$TMP/ui.sock" --session "Once upon a time" "Then what happened" >"$TMP/ask2" 2>"$TMP/askerr"
if [ $? -eq 0 ] && [ -s "$TMP/ask2" ]; then ok "ask --session continues a stored session"
else bad "ask --session" "$(cat "$TMP/askerr")"; fi
check "the open tab shows the shell's message live" "^  Then what happened"
line "/quit"
check "/quit quits" "EXITED 0"

# /model PATH: this tab switches to another model, loaded in the background,
# and the session remembers it; /model lists models to pick with /model N
start ui "$TMP/models.db"
check "starts on the default model" "stories260K.gguf \| cpu"
line "/set max_tokens 8"
line "/model $SHARED/models/llama2xs.gguf"
check "/model PATH loads it and says so" "llama2xs.gguf is ready"
check "the status line shows the tab's model" "^ llama2xs.gguf \| cpu"
line "Once upon a time"
check "and it answers" "^Assistant$"
idle
keys C-t
check "a new tab has the default model" "^ stories260K.gguf \| cpu"
keys C-q
check "quits" "EXITED 0"
mkdir -p "$TMP/cfg/llmchat"
echo "other-model = $TMP/configured.gguf" >"$TMP/cfg/llmchat/config"
start ui "$TMP/models.db"
keys M-1
check "after a restart the session's model is loaded again" "^ llama2xs.gguf \| cpu"
line "/model default"
check "/model default goes back" "answers with stories260K.gguf again"
# /model lists the default, the models sessions used and the config file's; /model N picks
line "/model"
check "/model numbers the default model" "^  1  stories260K.gguf  \(default\)  \(this tab\)"
check "/model lists the model a session used" "^  2  llama2xs.gguf  \(open\)"
check "/model lists the config file's other-model, marked missing" "^  3  configured.gguf  \(missing\)"
line "/model 2"
check "/model N switches the tab to entry N" "this tab answers with llama2xs.gguf"
keys C-q
check "quits" "EXITED 0"
rm -f "$TMP/cfg/llmchat/config"

# a corrupt database: the error is shown, the file is left as it was, and
# chatting goes on in memory
head -c 8192 /dev/urandom >"$TMP/bad.db"
sum_before=$(cksum <"$TMP/bad.db")
start ui "$TMP/bad.db"
check "a corrupt database gives a clear error" "not an llmchat database"
line "/set max_tokens 8"
line "Hello there"
check "chatting goes on without the database" "^Assistant"
idle
keys C-q
check "Ctrl-Q with messages not saved asks first" "not saved: Ctrl-Q again"
keys C-q
check "the second Ctrl-Q quits" "EXITED 0"
if grep -qs "Hello there" "$TMP"/llmchat-unsaved-*.md; then ok "... and the unsaved chat is in llmchat-unsaved-*.md beside the database"
else bad "the unsaved chat is kept in a file" "$(ls "$TMP")"; fi
if [ "$(cksum <"$TMP/bad.db")" = "$sum_before" ]; then ok "the corrupt file is untouched"
else bad "the corrupt file is untouched"; fi

# a small terminal still works, and resizing redraws
start ui "$TMP/small.db" 40 10
check "a 40x10 terminal draws the tab bar and status" "1:New chat"
line "/set max_tokens 8"
line "Hi"
check "and chats" "^Assistant"
idle
keys Up
check "Up brings back the last input" "^> Hi"
keys C-u
$T resize-window -t ui -x 60 -y 14 2>/dev/null
check "after a resize it redraws" "stories260K"
keys C-q
check "quits" "EXITED 0"

# issue 19 at 60 columns: the tab bar keeps the current tab in view past nine
# tabs, the status line ends on a whole field, /edit is left with Esc, and a
# second chat on the same database is warned
start ui "$TMP/narrow.db" 60 16
check "starts at 60 columns" "1:New chat"
line "/set max_tokens 4"
line "Hi"
check "answers" "^Assistant"
idle
if screen | tail -1 | grep -qE -- '[^ |] *$' && ! screen | tail -1 | grep -qE -- '\| *$|KV 0/0'; then
    ok "the status line ends on a whole field"
else bad "the status line ends on a whole field" "$(screen | tail -1)"; fi
line "/edit"
check "/edit puts the message back" "^> Hi"
keys Escape
check "Esc leaves /edit and empties the input" "left /edit"
if screen | grep -qE -- "^> *$"; then ok "the input box is empty after Esc"; else bad "the input box is empty after Esc" "$(screen)"; fi
i=1; while [ $i -lt 12 ]; do keys C-t; i=$((i + 1)); done
check "the twelfth tab is shown at the right end of a full bar" "^<.* 12:New chat *$"
line "/tab 1"
check "/tab 1 goes back to the first, the bar starts there again" "^ 1:Hi .*>$"
keys M-0
check "Alt-0 is the tenth tab" " 10:New chat"
$T new-session -d -s ui2 -x 80 -y 12 \
    "env XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$MODEL $LLMCHAT --db $TMP/narrow.db --no-socket; echo EXITED \$?; sleep 600"
i=0; while [ $i -lt $((100 * SLOW)) ] && ! $T capture-pane -t ui2 -p | grep -q "another llmchat chat"; do
    sleep 0.1; i=$((i + 1)); done
if $T capture-pane -t ui2 -p | grep -qE "another llmchat chat \(pid [0-9]+\) uses this database"; then
    ok "a second chat on the same database is warned"
else bad "a second chat on the same database is warned" "$($T capture-pane -t ui2 -p)"; fi
$T send-keys -t ui2 C-q
keys C-q
check "quits" "EXITED 0"

# Keys typed while the model loads (before curses is up) reach the input as typed:
# Enter sends, nothing is echoed under the loading line.
start_cmd 100 30 "env XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$MODEL LLC_TEST_LOAD_DELAY_MS=$((2000 * SLOW)) $LLMCHAT --db $TMP/ahead.db --no-socket"
check "the loading line shows while the model loads" "llmchat: loading .*stories260K.gguf"
line "/set max_tokens 4"
line "Typed ahead"
check "what was typed during loading is sent when the chat opens" "^  Typed ahead"
check "and answered" "^Assistant"
check_not "nothing typed is left in the input" "max_tokens 4"
idle
keys C-q
check "quits" "EXITED 0"

finish
