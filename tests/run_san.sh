#!/bin/sh
# run_san.sh — runs tests/run.sh under a sanitizer and fails on any report.
# Usage: run_san.sh asan|tsan LOGDIR TEST_BIN...
# Sanitizer reports go to files under LOGDIR (the CLI scripts capture the
# program's stderr, so a report there could go unseen); after the run every
# report is printed and the run fails if there is one, whatever the tests said.
# The environment (LLMCHAT, LLC_CLI_SCRIPTS...) passes through to run.sh;
# LLC_TEST_SLOW (how much longer the UI script may wait for the screen) is set
# for the slower sanitized program.
kind=$1 logs=$2
shift 2
rm -rf "$logs"
mkdir -p "$logs"
logs=$(cd "$logs" && pwd) # absolute: the scripts change directory
case "$kind" in
    asan) # (allocator_may_return_null, here and for tsan: the tests check that a KV budget too big for
          # memory is a clear error, which needs malloc to return NULL, not abort)
        export LLC_TEST_SLOW=${LLC_TEST_SLOW:-4}
        export ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1:abort_on_error=0:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
        export UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" ;;
    tsan)
        export LLC_TEST_SLOW=${LLC_TEST_SLOW:-8}
        export TSAN_OPTIONS="log_path=$logs/tsan:second_deadlock_stack=1:halt_on_error=0:allocator_may_return_null=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}" ;;
    *) echo "run_san.sh: unknown sanitizer '$kind'" >&2; exit 2 ;;
esac
# A sanitized program runs 2-15x slower: each test gets 25 minutes, not 10
# (a test that hangs still fails with its name).
export LLC_TEST_TIMEOUT=${LLC_TEST_TIMEOUT:-1500}
export LLC_SANITIZER=$kind # (scripts leave out what a sanitizer cannot add to, see cli_model.sh)
sh tests/run.sh "$@"
rc=$?
n=$(find "$logs" -type f | wc -l)
if [ "$n" -gt 0 ]; then
    for f in "$logs"/*; do echo "== $kind report $f"; cat "$f"; done
    echo "$kind: $n report(s) above"
    exit 1
fi
echo "$kind: no reports"
exit $rc
