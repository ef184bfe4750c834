#!/bin/sh
# bench_spec_pairs.sh — speculative vs plain decoding, measured as pairs of runs
# back to back (the machine's speed drifts between runs; a ratio within a pair
# does not). Prints one line per pair: plain and speculative decode-only tokens/s,
# their ratio, acceptance, tokens per verify step and the time share of drafting.
#
#   tests/tools/bench_spec_pairs.sh MODEL DRAFT [DRAFT_MAX [PAIRS]]
#
# Extra bench options can be given in BENCH_OPTS (default: -c 1 -p 64 -n 96).
set -eu
model=$1 draft=$2 k=${3:-8} pairs=${4:-3}
opts=${BENCH_OPTS:--c 1 -p 64 -n 96}
bin=$(dirname "$0")/../../build/llmchat
field() { printf '%s' "$2" | grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }
i=0
while [ "$i" -lt "$pairs" ]; do
    plain=$($bin bench -m "$model" --threads 2 $opts --json 2>/dev/null | tail -1)
    spec=$($bin bench -m "$model" --threads 2 --draft "$draft" --draft-p-min 0.000001 --draft-max "$k" \
        $opts --json 2>/dev/null | tail -1)
    p=$(field decode_tokens_per_s "$plain") s=$(field decode_tokens_per_s "$spec")
    echo "k=$k plain $p spec $s ratio $(awk "BEGIN { printf \"%.3f\", $s / $p }")" \
         "acceptance $(field acceptance_rate "$spec") tokens_per_verify $(field tokens_per_verify "$spec")" \
         "draft_share $(field draft_time_share "$spec")"
    i=$((i + 1))
done
