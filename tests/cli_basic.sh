# cli_basic.sh — the command line as a user meets it: help, tokenize, info, and
# the one-line errors with exit status 2 for bad usage.
. tests/lib_cli.sh

expect_out "tokenize default model (issue's done-when)" "1 403 407 261 378" \
    $LLMCHAT tokenize -m "$MODEL" "Once upon a time"
expect_out "tokenize with the default model path" "1 403 407 261 378" \
    $LLMCHAT tokenize "Once upon a time"
expect_out "tokenize --no-bos" "403 407 261 378" $LLMCHAT tokenize --model="$MODEL" --no-bos "Once upon a time"
printf 'Once upon a time' >"$TMP/in.txt"
expect_out "tokenize --file" "1 403 407 261 378" $LLMCHAT tokenize -m "$MODEL" -f "$TMP/in.txt"
expect_grep "tokenize --pieces shows pieces" "403  ' Once'" $LLMCHAT tokenize --pieces --no-bos "Once upon"
expect_grep "--help lists subcommands" "tokenize" $LLMCHAT --help
expect_grep "tokenize --help shows common options" "--kv-mem SIZE" $LLMCHAT tokenize --help
expect_grep "info shows metadata" "GGUF v3, 19 metadata keys, 48 tensors" $LLMCHAT info -m "$MODEL"
expect_grep "info --tensors" "blk.4.ffn_down.weight +F32 +\[172, 64\]" $LLMCHAT info -m "$MODEL" --tensors

expect_fail "no subcommand option" 2 "unknown option '--bogus'" $LLMCHAT --bogus
expect_fail "unknown subcommand" 2 "unknown subcommand 'frobnicate'" $LLMCHAT frobnicate
expect_fail "unknown option" 2 "^llmchat tokenize: unknown option '--nope'" $LLMCHAT tokenize --nope x
expect_fail "bad --threads" 2 "--threads: 'many' is not an integer" $LLMCHAT tokenize --threads many x
expect_fail "negative --threads" 2 "--threads: -3 is outside" $LLMCHAT tokenize --threads -3 x
expect_fail "bad --device" 2 "--device: 'tpu' is not one of" $LLMCHAT tokenize --device tpu x
expect_fail "bad --kv-mem" 2 "--kv-mem: '12Q' is not a size" $LLMCHAT tokenize --kv-mem 12Q x
expect_fail "missing value" 2 "--model needs a value" $LLMCHAT tokenize x --model
expect_fail "missing text" 2 "give a TEXT or --file" $LLMCHAT tokenize
expect_fail "flag with value" 2 "--no-bos takes no value" $LLMCHAT tokenize --no-bos=1 x
expect_fail "extra argument" 2 "unexpected argument 'y'" $LLMCHAT tokenize x y
expect_fail "missing model file" 1 "^llmchat: /no/such.gguf: No such file" $LLMCHAT tokenize -m /no/such.gguf x
head -c 5000 "$MODEL" >"$TMP/trunc.gguf"
expect_fail "truncated model" 1 "^llmchat: .*trunc.gguf: .*truncated file" $LLMCHAT tokenize -m "$TMP/trunc.gguf" x
printf 'not a model at all, just text' >"$TMP/text.gguf"
expect_fail "not a GGUF" 1 "not a GGUF file" $LLMCHAT info -m "$TMP/text.gguf"
expect_fail "missing --file" 1 "^llmchat: /no/file.txt: No such file" $LLMCHAT tokenize -f /no/file.txt

finish
