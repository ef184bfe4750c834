/* bench_engine.h — the concurrent-requests benchmark behind `llmchat bench --concurrency`. */
#ifndef LLC_APP_BENCH_ENGINE_H
#define LLC_APP_BENCH_ENGINE_H

#include "app/llm.h"

typedef struct bench_engine_opts {
    int concurrency, prompt_len, gen_len, shared_prefix, n;
    int beam;        /* beam width, 0 = sample */
    int kv_blocks;   /* 0 = enough for every sequence */
    int max_running, max_snapshots; /* engine_params' (0: its defaults): a hybrid
                                       model's states in a --kv-mem budget */
    int step_tokens; /* token budget per step */
    bool json;
    const cli_common *common; /* --draft / --ngram and draft lengths (may be NULL) */
} bench_engine_opts;

int bench_engine_run(llm *L, const bench_engine_opts *o, llc_err *err);

#endif
