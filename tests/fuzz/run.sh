#!/bin/sh
# run.sh — `make fuzz`: seeds the corpora, then runs each libFuzzer target for a
# bounded time. Usage: run.sh BUILD_DIR SECONDS TARGET...
# The corpus of each target grows in BUILD_DIR/corpus/TARGET across runs (the
# seeds are written again each time); a crash, leak or timeout leaves its input
# in BUILD_DIR/artifacts/ and fails the run. Ends with "N passed, N failed"
# (one per target).
dir=$1 secs=$2
shift 2
"$dir/seeds" "$dir/seeds_out" || exit 1
mkdir -p "$dir/artifacts"
pass=0 fail=0
for t in "$@"; do
    mkdir -p "$dir/corpus/$t"
    echo "== fuzz_$t for ${secs} s"
    "$dir/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$dir/artifacts/$t-" "$dir/corpus/$t" "$dir/seeds_out/$t" \
        >"$dir/fuzz_$t.log" 2>&1
    rc=$?
    grep -E '^#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb' "$dir/fuzz_$t.log"
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1))
        echo "ok   fuzz_$t"
    else
        fail=$((fail + 1))
        grep -A30 -E '^==[0-9]+==ERROR|runtime error|deadly signal|ALARM' "$dir/fuzz_$t.log" | head -60
        echo "FAIL fuzz_$t (status $rc; log $dir/fuzz_$t.log; input in $dir/artifacts/)"
    fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
