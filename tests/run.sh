#!/bin/sh
# run.sh — runs every test binary given as argument and every tests/cli_*.sh
# script, prints their output, and ends with the totals "N passed, N failed".
# Each test program ends its output with its own "N passed, N failed" line.
# LLC_NO_CLI=1 leaves the scripts out.
total_pass=0
total_fail=0
log=$(mktemp)
scripts=tests/cli_*.sh
[ -n "$LLC_NO_CLI" ] && scripts="" # (make test-cuda: the test programs only)
for t in "$@" $scripts; do
    [ -e "$t" ] || continue
    echo "== $t"
    case "$t" in
        *.sh) sh "$t" >"$log" 2>&1 ;;
        *) "$t" >"$log" 2>&1 ;;
    esac
    rc=$?
    cat "$log"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [ -n "$line" ]; then
        p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
        f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
    else
        p=0; f=1
        echo "   (no summary line: $t crashed or exited early, status $rc)"
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "   ($t exited with status $rc)"
    fi
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
done
rm -f "$log"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
