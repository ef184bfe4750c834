# lib_server.sh — helpers for the socket server tests (sourced after lib_cli.sh):
# starting `llmchat serve` in the background and waiting for it, sending NDJSON
# requests with tests/tools/ndjson_client, and one-line checks.
C=${NDJSON_CLIENT:-./build/tools/ndjson_client}
PIDS=""
trap 'for p in $PIDS; do kill -9 $p 2>/dev/null; done; rm -rf "$TMP"' EXIT

# serve LOG ARGS...: starts `llmchat serve ARGS` with stderr in LOG and waits
# until it says where it listens (or dies); SP is its pid. Status 0 when up.
serve() {
    log=$1
    shift
    : >"$log" # emptied here, not by the background job: else the wait below can
              # find the last server's " on unix:" in it before the new one starts
    $LLMCHAT serve "$@" 2>>"$log" &
    SP=$!
    PIDS="$PIDS $SP"
    i=0
    while [ $i -lt 200 ]; do
        grep -q " on unix:" "$log" 2>/dev/null && return 0
        kill -0 $SP 2>/dev/null || return 1
        sleep 0.05
        i=$((i + 1))
    done
    return 1
}

# stop_server PID: SIGTERM, waits; prints its exit status
stop_server() { # sets RC
    kill -TERM "$1" 2>/dev/null
    wait "$1"
    RC=$?
}

# req SOCK LINE...: sends the lines as requests, prints every event
req() {
    sock=$1
    shift
    printf '%s\n' "$@" | $C --timeout 20 "$sock"
}

# check NAME PATTERN TEXT: TEXT matches PATTERN (grep -E)
check() {
    if printf '%s\n' "$3" | grep -qE -- "$2"; then ok "$1"
    else bad "$1" "want /$2/" "got: $(printf '%s' "$3" | head -c 600)"; fi
}

# check_not NAME PATTERN TEXT: TEXT does not match PATTERN
check_not() {
    if printf '%s\n' "$3" | grep -qE -- "$2"; then bad "$1" "unwanted /$2/" "got: $(printf '%s' "$3" | head -c 600)"
    else ok "$1"; fi
}

# same NAME A B: A and B are equal and not empty
same() {
    if [ -n "$2" ] && [ "$2" = "$3" ]; then ok "$1"
    else bad "$1" "A: $(printf '%s' "$2" | head -c 300)" "B: $(printf '%s' "$3" | head -c 300)"; fi
}

# field NAME JSON_LINES: the first number after "NAME":
num_field() {
    printf '%s\n' "$2" | grep -oE "\"$1\":-?[0-9.]+" | head -n 1 | sed -E 's/.*://'
}
