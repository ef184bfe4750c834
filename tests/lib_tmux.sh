# lib_tmux.sh — driving the chat UI through tmux (sourced after lib_cli.sh):
# a detached tmux server per run, keys in, the screen out, waiting for text.
if ! command -v tmux >/dev/null 2>&1; then
    bad "tmux is needed for the UI tests (make deps installs it)"
    finish
    exit 1
fi
RUNS=0
T="tmux -L llmchat-test-$$-0"
trap '$T kill-server 2>/dev/null; for p in $PIDS; do kill -9 $p 2>/dev/null; done; rm -rf "$TMP"' EXIT

# start_cmd WIDTH HEIGHT COMMAND: COMMAND in a fresh detached tmux session
# (a fresh server each time: no race with the old one); the pane stays after
# it exits, with "EXITED status".
start_cmd() {
    $T kill-server 2>/dev/null
    RUNS=$((RUNS + 1))
    T="tmux -L llmchat-test-$$-$RUNS"
    $T new-session -d -s ui -x "$1" -y "$2" "$3; echo EXITED \$?; sleep 600"
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
# idle: until no tab is generating (the tab bar marks one with " *") and no
# answer on the screen is still streaming
idle() {
    i=0
    while [ $i -lt $((600 * SLOW)) ] && { screen | head -1 | grep -qE -- ' \*( |$)' ||
        screen | grep -qE -- "^Assistant \.\.\.( |$)"; }; do
        sleep 0.1
        i=$((i + 1))
    done
}
check() { # check NAME PATTERN [SECONDS]
    if wait_for "$2" "$3"; then ok "$1"; else bad "$1" "screen:" "$(screen)"; fi
}
check_not() { # check_not NAME PATTERN: the screen shows no line matching PATTERN now
    if screen | grep -q -- "$2"; then bad "$1" "screen:" "$(screen)"; else ok "$1"; fi
}
