# cli_remote.sh — `llmchat --remote URL` end to end through tmux: the chat
# answered by an OpenAI-compatible server (tests/tools/fake_openai, and
# llmchat's own `serve`), with no local model at all: streaming, /n, search,
# export, restart, Markdown and copying a code block; errors shown in the tab (401, a server dying mid-answer,
# connection refused), Ctrl-C closing the stream.
. tests/lib_cli.sh
. tests/lib_tmux.sh
FAKE=./build/tools/fake_openai
mkdir -p "$TMP/cfg"
PIDS=""

$FAKE "$TMP/port" sekrit &
PIDS="$PIDS $!"
FAKE_PID=$!
i=0; while [ ! -s "$TMP/port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
PORT=$(cat "$TMP/port")
URL="http://127.0.0.1:$PORT/v1"
# no model anywhere: LLMCHAT_MODEL points at nothing
NOMODEL="env XDG_CONFIG_HOME=$TMP/cfg LLMCHAT_MODEL=$TMP/none.gguf"

DB="$TMP/remote.db"
start_cmd 100 30 "$NOMODEL $LLMCHAT --remote $URL --remote-api-key sekrit --db $DB --no-socket"
$T set-option -g set-clipboard on
check "opens without a local model; the status names the server" "remote 127\.0\.0\.1:$PORT"
line "hello from the terminal"
check "the answer streams from the server" "^  You said: hello from the terminal"
check "the model is the one the server lists" " ok \| remote"
line "/n 2"
line "second question"
check "/n 2 asks for two answers" "answer 1 of 2"
line "/alt"
check "/alt shows the other" "answer 2 of 2"
line "mode:markdown please"
check "Markdown: a code block shows its language on a border" "^  ┌─ c"
check "Markdown: the code keeps its indentation" "^  │     return 0;"
check "Markdown: lists get bullets" "^  • one"
check "Markdown: emphasis markers are gone" "^  Some bold and code\.$"
check_not "Markdown: no fence lines are shown" '```'
idle
keys M-k
check "Alt-K copies the last code block (the notice names its number)" "copied code block #1 \\(32 bytes\\)"
if [ "$($T show-buffer 2>/dev/null)" = "$(printf 'int main(void) {\n    return 0;\n}')" ]; then
    ok "the code reached the clipboard through OSC 52 (tmux buffer)"
else bad "the code reached the clipboard through OSC 52 (tmux buffer)" "$($T show-buffer 2>&1)"; fi
line "/search terminal"
check "/search finds remote answers" "Search: terminal"
line "/export $TMP/out.md"
check "/export writes the file" "exported to"
if grep -q "You said: hello from the terminal" "$TMP/out.md" 2>/dev/null && grep -q '```c' "$TMP/out.md"; then
    ok "the export has the answers as plain text"
else bad "the export has the answers as plain text" "$(head -30 "$TMP/out.md" 2>&1)"; fi
line "/model"
check "/model says where answers come from" "remote OpenAI-compatible server http://127.0.0.1:$PORT/v1/chat/completions"
line "mode:trickle go"
check "a long answer streams" "w3 "
line "a follow-up typed meanwhile"
check "Enter while it streams queues the message (nothing is lost)" "^You \(queued: sent when the answer ends\)"
check "the queued message goes when the answer ends" "^  You said: a follow-up typed meanwhile" 15
line "mode:die now"
check "a server dying mid-answer: the answer is marked" "^Assistant \[error\]"
check "the text that came is kept" "^  The answer was going well"
check "and the reason is shown in the tab" "broke off mid-answer.*kept|ended the stream before"
line "mode:slow go"
check "a slow answer streams" "tick tick tick"
keys C-c
check "Ctrl-C closes the stream: the answer stops" "^Assistant \[stopped\]"
line "/beam 2"
check "/beam is refused when typed, with a reason" "beam search needs the local engine"
check "the refused command stays in the input" "^> /beam 2"
keys C-u
kill -9 $FAKE_PID
sleep 0.2
line "is anyone there"
check "a server that is gone: connection refused is shown" "cannot reach 127\.0\.0\.1:$PORT"
keys C-q
check "quits" "EXITED 0"
# (the sqlite3 tool is one of the build's packages: .ci/install-deps)
n=$(sqlite3 "$DB" "select count(*) from messages where content like 'You said:%'" 2>&1)
if [ "$n" -ge 3 ] 2>/dev/null; then ok "answers are stored in the database ($n)"
else bad "answers are stored in the database" "sqlite3 said: $n"; fi

# the same database again, through LLMCHAT_REMOTE and a wrong key
$FAKE "$TMP/port2" sekrit &
PIDS="$PIDS $!"
i=0; while [ ! -s "$TMP/port2" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
URL2="http://127.0.0.1:$(cat "$TMP/port2")"
start_cmd 100 30 "$NOMODEL LLMCHAT_REMOTE=$URL2 LLMCHAT_REMOTE_API_KEY=wrong LLMCHAT_REMOTE_MODEL=ok $LLMCHAT --db $DB --no-socket"
wait_for "remote 127"
check "restart restores the conversation" "^  is anyone there"
line "knock knock"
check "a wrong key: HTTP 401 and the server's message in the tab" "HTTP 401 from the server: Incorrect API key"
keys C-q
check "quits" "EXITED 0"

# kill -9 while an answer streams: what was on the screen is in the database,
# but for at most 0.5 s of it (the fake server sends "wN " every 50 ms, so at
# most 10 pieces may be missing)
start_cmd 100 30 "$NOMODEL $LLMCHAT --remote $URL2 --remote-api-key sekrit --db $TMP/kill.db --no-socket"
wait_for "remote 127"
line "mode:trickle go"
wait_for "w40 " 20
PANE=$($T display -p -t ui '#{pane_pid}')
UIPID=$(pgrep -P "$PANE" | head -1)
shown=$(screen | grep -oE 'w[0-9]+' | sed 's/w//' | sort -n | tail -1)
kill -9 "$UIPID"
wait_for "EXITED 137"
start_cmd 100 30 "$NOMODEL $LLMCHAT --remote $URL2 --remote-api-key sekrit --db $TMP/kill.db --no-socket"
check "after kill -9 the answer comes back marked interrupted" "^Assistant \[interrupted\]"
kept=$(screen | grep -oE 'w[0-9]+' | sed 's/w//' | sort -n | tail -1)
if [ -n "$shown" ] && [ -n "$kept" ] && [ $((shown - kept)) -le 10 ]; then
    ok "kill -9 lost $((shown - kept)) pieces of 50 ms (shown w$shown, stored w$kept; at most 0.5 s)"
else bad "kill -9 lost at most 0.5 s of the answer" "shown w$shown, stored w$kept" "$(screen)"; fi
echo "measured: kill -9 mid-stream: shown w$shown, stored w$kept" >&2
keys C-q
wait_for "EXITED 0"

# llmchat's own serve as the remote
$LLMCHAT serve -m "$MODEL" --socket "$TMP/serve.sock" --listen 127.0.0.1:0 --db "$TMP/serve.db" 2>"$TMP/serve.log" &
SP=$!
PIDS="$PIDS $SP"
i=0; while ! grep -qE 'tcp port [0-9]+' "$TMP/serve.log" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
SPORT=$(grep -oE 'tcp port [0-9]+' "$TMP/serve.log" | grep -oE '[0-9]+$')
if [ -z "$SPORT" ]; then
    bad "llmchat serve starts" "$(cat "$TMP/serve.log")"
else
    start_cmd 100 30 "$NOMODEL $LLMCHAT --remote http://127.0.0.1:$SPORT --db $TMP/r2.db --no-socket"
    wait_for "remote 127"
    line "/set max_tokens 16"
    line "Once upon a time"
    check "llmchat serve as the remote answers" "^Assistant$"
    check "its model is the one it serves" "stories260K[^ ]* \| remote"
    keys C-q
    check "quits" "EXITED 0"
fi
finish
