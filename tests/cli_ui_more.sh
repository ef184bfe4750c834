# cli_ui_more.sh — the conveniences of issue 33 that the best terminal chat
# clients have, driven through tmux against a remote server
# (tests/tools/fake_openai): the mouse (the wheel scrolls, a click on the tab
# bar switches tabs, one on a code block's border copies it; reports arrive as xterm's SGR 1006, which ncurses turns on
# for TERM=xterm-256color), syntax colours and tables in a streamed answer,
# /copy code N, and the config file's defaults and roles.
. tests/lib_cli.sh

. tests/lib_tmux.sh
PIDS=""
mkdir -p "$TMP/cfg/llmchat"

./build/tools/fake_openai "$TMP/port" &
PIDS="$PIDS $!"
i=0; while [ ! -s "$TMP/port" ] && [ $i -lt $((50 * SLOW)) ]; do sleep 0.1; i=$((i + 1)); done
URL="http://127.0.0.1:$(cat "$TMP/port")/v1"

# start DB [ENV...]: the chat on the fake server, 100x30, TERM=xterm-256color
start() {
    db=$1
    shift
    start_cmd 100 30 "env TERM=xterm-256color XDG_CONFIG_HOME=$TMP/cfg $* $LLMCHAT --remote $URL --db $db --no-socket"
}
# mouse B X Y [m]: an SGR mouse report (button B at column X, row Y, 1-based; m: release)
mouse() { keys -l "$(printf '\033[<%s;%s;%s%s' "$1" "$2" "$3" "${4:-M}")"; }
# click B X Y: press and release in one write, as a fast click arrives
# (ncurses reads on for the next key after an event outside the chat's mouse
# mask, so a release it filtered left the click undrawn until a key came)
click() { keys -l "$(printf '\033[<%s;%s;%sM\033[<%s;%s;%sm' "$1" "$2" "$3" "$1" "$2" "$3")"; }

start "$TMP/mouse.db"
check "opens on the fake server" "remote 127\\.0\\.0\\.1:"
if [ "$($T display -p -t ui '#{mouse_standard_flag}#{mouse_sgr_flag}')" = 11 ]; then
    ok "the chat asks the terminal for mouse reports in SGR 1006 form"
else bad "the chat asks the terminal for mouse reports in SGR 1006 form" \
    "$($T display -p -t ui 'standard #{mouse_standard_flag} sgr #{mouse_sgr_flag}')"; fi
keys -l "draft one"
keys C-t
check "a second tab" " 2:New chat"
keys -l "draft two"
check "the second tab has its own draft" "^> draft two *$"
click 0 3 1
check "a click on the first tab switches to it (its draft comes back)" "^> draft one *$"
mouse 0 14 1
mouse 0 14 1 m
check "a click on the second tab switches back" "^> draft two *$"
keys C-u
line "mode:slow go"
mouse 2 40 10
check "a right click blocks nothing: the answer goes on streaming" "(tick ){15}"
keys C-c
check "... and Ctrl-C stops it" "^Assistant \\[stopped\\]"
i=1
while [ $i -le 12 ]; do line "message number $i"; i=$((i + 1)); done
check "a long conversation" "You said: message number 12"
idle
mouse 64 40 10
check "the wheel up scrolls the transcript up" "more below \\(PgDn\\)"
check_not "... the last answer is out of view" "You said: message number 12"
mouse 65 40 10
mouse 65 40 10
if wait_for "You said: message number 12" && ! screen | grep -q "more below"; then
    ok "the wheel down scrolls back to the end"
else bad "the wheel down scrolls back to the end" "$(screen)"; fi
keys -l "keys still work"
check "the keyboard still types after mouse reports" "^> keys still work *$"
keys C-u
keys C-q
check "quits" "EXITED 0"
if [ "$($T display -p -t ui '#{mouse_any_flag}#{mouse_standard_flag}#{mouse_sgr_flag}')" = 000 ]; then
    ok "... and gives the mouse back to the terminal"
else bad "... and gives the mouse back to the terminal" \
    "$($T display -p -t ui 'any #{mouse_any_flag} standard #{mouse_standard_flag} sgr #{mouse_sgr_flag}')"; fi

# a streamed answer with a table (split inside its rows) and two code blocks
start "$TMP/rich.db"
check "opens" "remote 127\\.0\\.0\\.1:"
$T set -s set-clipboard on # (OSC 52 from the chat becomes a tmux buffer)
line "mode:rich show me"
check "a table streamed in pieces is drawn as a box" "^  ┌───────┬──────┐ *$"
check "... the header and its rule" "^  │ name  │ size │ *$"
check "... columns aligned as the delimiter row says (size to the right)" "^  │ alpha │    1 │ *$"
check "... every row" "^  │ beta  │   22 │ *$"
check "... closed below" "^  └───────┴──────┘ *$"
check "code blocks carry their number on the border" "^  ┌─ python #1 *$"
check "... the second too" "^  ┌─ sh #2 *$"
idle
E=$(printf '\033')
code=$($T capture-pane -t ui -p -e | grep "greet")
if echo "$code" | grep -qF "${E}[38;5;213mdef" && echo "$code" | grep -qvF "${E}[38;5;213mgreet"; then
    ok "a Python keyword is coloured, a name is not"
else bad "a Python keyword is coloured, a name is not" "$(echo "$code" | cat -v)"; fi
code=$($T capture-pane -t ui -p -e | grep "say hi")
if echo "$code" | grep -qF "${E}[38;5;150m\"hi \"" && echo "$code" | grep -qF "${E}[38;5;245m# say hi"; then
    ok "... strings and comments have colours of their own"
else bad "... strings and comments have colours of their own" "$(echo "$code" | cat -v)"; fi
line "/copy code 2"
check "/copy code 2 copies the block numbered #2" "copied code block #2 \\(17 bytes\\) to the clipboard"
if [ "$($T show-buffer 2>/dev/null)" = "echo second block" ]; then ok "... its code reaches the clipboard (OSC 52)"
else bad "... its code reaches the clipboard (OSC 52)" "buffer: $($T show-buffer 2>&1)"; fi
keys M-k
check "Alt-K copies the last code block" "copied code block #2 \\(17 bytes\\)"
keys M-k
check "Alt-K again takes the block before it" "copied code block #1 \\(50 bytes\\)"
if [ "$($T show-buffer 2>/dev/null | head -n 1)" = "def greet(name):" ]; then ok "... into the clipboard"
else bad "... into the clipboard" "buffer: $($T show-buffer 2>&1)"; fi
keys M-k
check "... and round to the last again" "copied code block #2 \\(17 bytes\\)"
line "/copy code 3"
check "/copy code 3 says how many blocks there are" "/copy: the last answer with code has 2 code blocks \\(#1 to #2\\)"
keys C-u
line "/copy 2 code 1"
check "/copy N code K takes a block of message N" "copied code block #1 of message 2"
if [ "$($T show-buffer 2>/dev/null)" = "$(printf 'def greet(name):\n    return "hi " + name  # say hi')" ]; then
    ok "... with its indentation"
else bad "... with its indentation" "buffer: $($T show-buffer 2>&1)"; fi
y=$(screen | grep -n "┌─ sh #2" | head -n 1 | cut -d: -f1)
mouse 0 5 "$y"
mouse 0 5 "$y" m
check "a click on a code block's border copies the block" "copied code block #2 of message 2 \\(17 bytes\\)"
if [ "$($T show-buffer 2>/dev/null)" = "echo second block" ]; then ok "... into the clipboard"
else bad "... into the clipboard" "buffer: $($T show-buffer 2>&1)"; fi
$T set-buffer "unchanged"
y=$(screen | grep -n "│ echo second block" | head -n 1 | cut -d: -f1)
mouse 0 5 "$y"
mouse 0 5 "$y" m
sleep 0.5
if [ "$($T show-buffer 2>/dev/null)" = "unchanged" ]; then ok "... a click on its code copies nothing"
else bad "... a click on its code copies nothing" "buffer: $($T show-buffer 2>&1)"; fi
keys C-q
check "quits" "EXITED 0"

# the config file: a new tab's temperature, max_tokens and system prompt; roles
cat >"$TMP/cfg/llmchat/config" <<'EOF2'
# defaults of a new tab
temperature = 0.3
max-tokens = 77
system = You are terse.\nAlways.
role reviewer = You review code and say what is wrong.
role poet = Answer in verse.
EOF2
start_cmd 100 60 "env TERM=xterm-256color XDG_CONFIG_HOME=$TMP/cfg $LLMCHAT --remote $URL --db $TMP/cfg.db --no-socket"
check "opens with the config" "remote 127\\.0\\.0\\.1:"
line "/set"
check "a new tab takes the config's temperature and max-tokens" "temp 0\\.30 .* max_tokens 77 "
line "/system"
check "... and its system prompt" "^You are terse\\. *$"
check "... with its line breaks" "^Always\\. *$"
line "/role"
check "/role lists the config's roles" "^  reviewer +You review code and say what is wrong\\. *$"
check "... all of them" "^  poet +Answer in verse\\. *$"
line "/role poet"
check "/role NAME applies one" "role poet: its system prompt is this tab's now"
line "/system"
check "... as the tab's system prompt" "^Answer in verse\\. *$"
line "/role bard"
check "an unknown role is refused" "/role bard: no such role"
keys C-u
keys F1
check "F1 lists the roles" "^  reviewer poet *$"
check "... and the config keys" "role NAME = TEXT \\(for /role\\), mouse = on\\|off"
check "... and the mouse" "Mouse +the wheel scrolls, a click on a tab switches to it"
keys Escape
i=0; while [ $i -lt $((50 * SLOW)) ] && screen | grep -q "^Keys"; do sleep 0.1; i=$((i + 1)); done
keys C-q # (not right after Esc: the two would read as Alt-Ctrl-Q)
check "quits" "EXITED 0"
printf 'max-tokens = 5\ntemperature = hot\n' >"$TMP/cfg/llmchat/config"
expect_fail "a bad value in the config is refused, naming the file and line" 1 \
    "cfg/llmchat/config:2: temperature 'hot': a number from 0 to 5" \
    env XDG_CONFIG_HOME="$TMP/cfg" $LLMCHAT --remote "$URL" --db "$TMP/cfg.db" --no-socket
printf 'role two words = x\n' >"$TMP/cfg/llmchat/config"
expect_fail "a role's name is one word" 1 "config:1: 'role NAME = TEXT'" \
    env XDG_CONFIG_HOME="$TMP/cfg" $LLMCHAT --remote "$URL" --db "$TMP/cfg.db" --no-socket

# mouse = off in the config: reports are not asked for (the terminal keeps clicks)
printf 'mouse = off\n' >"$TMP/cfg/llmchat/config"
start "$TMP/mouse.db"
check "opens with mouse = off" "remote 127\\.0\\.0\\.1:"
if [ "$($T display -p -t ui '#{mouse_any_flag}#{mouse_standard_flag}#{mouse_button_flag}')" = 000 ]; then
    ok "mouse = off asks for no mouse reports (the terminal selects text as usual)"
else bad "mouse = off asks for no mouse reports (the terminal selects text as usual)" \
    "$($T display -p -t ui 'any #{mouse_any_flag} standard #{mouse_standard_flag} button #{mouse_button_flag}')"; fi
keys C-q
check "quits" "EXITED 0"
rm -f "$TMP/cfg/llmchat/config"

finish
