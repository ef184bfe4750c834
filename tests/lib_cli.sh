# lib_cli.sh — helpers for the command-line tests (sourced by tests/cli_*.sh).
# Each check counts as one test; `finish` prints "N passed, N failed".
LLMCHAT=${LLMCHAT:-./build/llmchat}
SHARED=${LLC_SHARED:-../shared}
MODEL="$SHARED/models/stories260K.gguf"
pass=0
fail=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }

# expect_out NAME EXPECTED_STDOUT CMD...: exit 0 and exact stdout
expect_out() {
    name=$1 want=$2
    shift 2
    got=$("$@" 2>"$TMP/err")
    rc=$?
    if [ $rc -eq 0 ] && [ "$got" = "$want" ]; then ok "$name"
    else bad "$name" "status $rc" "want: $want" "got:  $got" "stderr: $(cat "$TMP/err")"; fi
}

# expect_fail NAME STATUS PATTERN CMD...: exits with STATUS and prints one stderr
# line matching PATTERN (grep -E), nothing on stdout
expect_fail() {
    name=$1 want_rc=$2 pat=$3
    shift 3
    timeout -k 5 "${LLC_FAIL_TIMEOUT:-300}" "$@" >"$TMP/out" 2>"$TMP/err" # a refusal that hangs fails here
    rc=$?
    lines=$(wc -l <"$TMP/err")
    if [ $rc -eq "$want_rc" ] && [ "$lines" -eq 1 ] && grep -qE -- "$pat" "$TMP/err" && [ ! -s "$TMP/out" ]; then
        ok "$name"
    else
        bad "$name" "status $rc (want $want_rc), $lines stderr lines" "stderr: $(cat "$TMP/err")" \
            "stdout: $(head -c 300 "$TMP/out")"
    fi
}

# expect_grep NAME PATTERN CMD...: exit 0 and stdout matches PATTERN
expect_grep() {
    name=$1 pat=$2
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 0 ] && grep -qE -- "$pat" "$TMP/out"; then ok "$name"
    else bad "$name" "status $rc" "stdout: $(head -c 300 "$TMP/out")" "stderr: $(cat "$TMP/err")"; fi
}

finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
