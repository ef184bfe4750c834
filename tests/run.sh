#!/bin/sh
# run.sh — runs every test binary given as argument and every tests/cli_*.sh
# script, prints their output, and ends with the totals "N passed, N failed".
# Each test program ends its output with its own "N passed, N failed" line.
# LLC_NO_CLI=1 leaves the scripts out; LLC_CLI_SCRIPTS="a.sh b.sh" runs only those.
# The engine and model tests run again with the SIMD level capped (LLC_SIMD=avx2,
# scalar), so a kernel path that breaks "batched == alone" fails on any machine
# (LLC_SIMD only lowers the level: on a machine without AVX-512 the avx2 run
# repeats the default one). LLC_NO_SIMD_RERUN=1 leaves these runs out.
# The engine tests (prefix sharing, forks, preemption, beams, speculation) run
# again with f16 and q8_0 KV caches (LLC_TEST_KV_TYPE); LLC_NO_KV_RERUN=1 leaves
# these runs out.
# LLC_RUN_PREFIX runs each test program through a command (make test-arm: qemu-aarch64).
# Every test has a time limit (LLC_TEST_TIMEOUT seconds, default 600): a hung test
# fails with its name instead of hanging the run. The run ends with its ten
# slowest entries (CI's 90 minutes are a budget: this shows where they go).
limit=${LLC_TEST_TIMEOUT:-600}
total_pass=0
total_fail=0
log=$(mktemp)
times=$(mktemp)
run_start=$(date +%s)
scripts=${LLC_CLI_SCRIPTS:-tests/cli_*.sh}
[ -n "$LLC_NO_CLI" ] && scripts="" # (make test-cuda: the test programs only)
simd_tests=""
[ -n "$LLC_NO_SIMD_RERUN" ] || for t in "$@"; do
    case "$t" in
        */test_engine|*/test_engine_spec|*/test_engine_beam|*/test_engine_hybrid|*/test_model)
            simd_tests="$simd_tests avx2:$t scalar:$t" ;;
    esac
done
kv_tests=""
[ -n "$LLC_NO_KV_RERUN" ] || for t in "$@"; do
    case "$t" in
        */test_engine|*/test_engine_spec|*/test_engine_beam|*/test_engine_hybrid)
            kv_tests="$kv_tests kv_f16:$t kv_q8_0:$t" ;;
    esac
done
for entry in "$@" $scripts $simd_tests $kv_tests; do
    simd=""
    kv=""
    t=$entry
    case "$entry" in
        avx2:*|scalar:*) simd=${entry%%:*}; t=${entry#*:} ;;
        kv_*:*) kv=${entry%%:*}; kv=${kv#kv_}; t=${entry#*:} ;;
    esac
    [ -e "$t" ] || continue
    if [ -n "$simd" ]; then echo "== LLC_SIMD=$simd $t"
    elif [ -n "$kv" ]; then echo "== LLC_TEST_KV_TYPE=$kv $t"
    else echo "== $t"; fi
    t0=$(date +%s)
    case "$t" in
        *.sh) timeout -k 10 "$limit" sh "$t" >"$log" 2>&1 ;;
        *) LLC_SIMD=${simd:-$LLC_SIMD} LLC_TEST_KV_TYPE=${kv:-$LLC_TEST_KV_TYPE} \
               timeout -k 10 "$limit" $LLC_RUN_PREFIX "$t" >"$log" 2>&1 ;;
    esac
    rc=$?
    echo "$(($(date +%s) - t0)) $entry" >>"$times"
    cat "$log"
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo "   ($t ran past its ${limit} s limit and was stopped)"
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
echo "slowest (seconds) of $(($(date +%s) - run_start)) s in all:"
sort -rn "$times" | head -n 10 | sed 's/^/    /'
rm -f "$log" "$times"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
