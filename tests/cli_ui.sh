# cli_ui.sh — the chat UI end to end, driven through tmux with a temporary
# database and the default model: streamed answers, two tabs, /n and /alt,
# /regen, /search, /export, quitting and finding everything again, a corrupt
# database (error shown, file untouched, chatting goes on in memory), a small
# terminal, and bad commands.
. tests/lib_cli.sh

if ! command -v tmux >/dev/null 2>&1; then
    bad "tmux is needed for the UI tests (make deps installs it)"
    finish
    exit 1
fi
RUNS=0
T="tmux -L llmchat-test-$$-0"
trap '$T kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
mkdir -p "$TMP/cfg"

# start NAME DB [WIDTH HEIGHT]: the UI in a detached tmux session
start() {
    $T kill-server 2>/dev/null
    RUNS=$((RUNS + 1))
    T="tmux -L llmchat-test-$$-$RUNS" # a fresh server each time: no race with the old one
    $T new-session -d -s ui -x "${3:-100}" -y "${4:-30}" \
        "env XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$MODEL $LLMCHAT --db $2 --socket $TMP/ui.sock; echo EXITED \$?; sleep 600"
}
screen() { $T capture-pane -t ui -p 2>/dev/null; }
keys() { $T send-keys -t ui "$@"; }
line() { $T send-keys -t ui -l "$1"; $T send-keys -t ui Enter; }
# Waits end as soon as the screen is ready; LLC_TEST_SLOW multiplies their limits
# (sanitizer builds run several times slower: tests/run_san.sh sets it).
SLOW=${LLC_TEST_SLOW:-1}
# wait_for PATTERN [SECONDS]: until the screen matches (grep -E)
wait_for() {
    i=0
    while [ $i -lt $((${2:-10} * 10 * SLOW)) ]; do
        screen | grep -qE -- "$1" && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
# idle: until no answer on the screen is still streaming
idle() {
    i=0
    while [ $i -lt $((100 * SLOW)) ] && screen | grep -qE -- "^Assistant.* \.\.\.$"; do sleep 0.1; i=$((i + 1)); done
}
check() { # check NAME PATTERN [SECONDS]
    if wait_for "$2" "$3"; then ok "$1"; else bad "$1" "screen:" "$(screen)"; fi
}

DB="$TMP/chat.db"
start ui "$DB"
check "opens on the default model" "stories260K.gguf"
line "/set temp 0"
line "/set max_tokens 24"
line "Once upon a time"
check "the answer streams in under the message" "^Assistant$"
check "the status line counts the tokens" "tok/s"
screen >"$TMP/s1"
if grep -A1 "^Assistant$" "$TMP/s1" | tail -1 | grep -qE "^  [A-Za-z\"]"; then ok "the answer has text"
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
line "/set temp hot"
check "a bad value is a one-line error" "not a number"
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

# a corrupt database: the error is shown, the file is left as it was, and
# chatting goes on in memory
head -c 8192 /dev/urandom >"$TMP/bad.db"
sum_before=$(cksum <"$TMP/bad.db")
start ui "$TMP/bad.db"
check "a corrupt database gives a clear error" "not an llmchat database"
line "/set max_tokens 8"
line "Hello there"
check "chatting goes on without the database" "^Assistant"
keys C-q
check "quits" "EXITED 0"
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

finish
