/* cli.h — the one command-line parser every subcommand uses.
 *
 * A subcommand describes its options as a table of cli_opt; the options shared by
 * all subcommands (-m/--model, --threads, --device, --db, --socket, --kv-mem) live
 * in one place (cli_common_opts) and are spelled the same everywhere. Parsing
 * accepts `--name value`, `--name=value`, `-x value`, `-xvalue` and `--` to end
 * options. Unknown options and bad values print one line and exit with status 2;
 * `-h/--help` prints the subcommand's help and exits 0. */
#ifndef LLC_CLI_H
#define LLC_CLI_H

#include <stdbool.h>
#include <stdint.h>

typedef enum cli_kind {
    CLI_FLAG,   /* bool, no value */
    CLI_INT,    /* int */
    CLI_I64,    /* int64_t */
    CLI_FLOAT,  /* float */
    CLI_STR,    /* const char * */
    CLI_SIZE,   /* int64_t bytes; accepts suffixes K, M, G (powers of 1024) */
    CLI_CHOICE, /* const char *, one of `choices` (NULL-terminated) */
} cli_kind;

typedef struct cli_opt {
    const char *name;  /* long name without "--" */
    char short_name;   /* 0 if none */
    cli_kind kind;
    void *dst;         /* where the value goes (type per kind) */
    const char *metavar;
    const char *help;
    double min, max;   /* for numbers; min == max means no range check */
    const char *const *choices;
} cli_opt;

/* Options every subcommand understands. */
typedef struct cli_common {
    const char *model;     /* -m/--model PATH */
    bool model_given;      /* -m/--model was on the command line */
    int threads;           /* --threads N (0 = all cores) */
    const char *device;    /* --device auto|cpu|cuda */
    const char *db;        /* --db PATH */
    const char *socket;    /* --socket PATH */
    int64_t kv_mem;        /* --kv-mem SIZE (0 = automatic) */
    const char *kv_type;   /* --kv-type f32|f16|q8_0: K/V element type (NULL: the default, f16) */
    const char *draft;     /* --draft PATH: speculative decoding draft model */
    int draft_max, draft_min; /* --draft-max/--draft-min N (0 = engine default) */
    float draft_p_min;     /* --draft-p-min P (0 = engine default) */
    bool ngram;            /* --ngram: n-gram drafting without a draft model */
    bool no_warmup;        /* --no-warmup: no warm-up forward pass at load (engine_params.warmup) */
    bool quiet;            /* no notices on stderr: the chat UI owns the terminal
                              (opening a model from /model while curses draws) */
    bool no_prepack;       /* (set by a subcommand, or LLC_PREPACK=0) no packed weight
                              copies: one short or one-row run gains nothing from them */
} cli_common;

/* The default model path: $LLMCHAT_MODEL, else ../shared/models/stories260K.gguf
 * relative to the executable's checkout, else the same relative to the cwd. */
const char *cli_default_model(void);

typedef struct cli_cmd {
    const char *name;    /* "tokenize" */
    const char *usage;   /* "[options] (TEXT | --file PATH)" */
    const char *summary; /* one line for `llmchat --help` */
    const cli_opt *opts; /* subcommand options, terminated by {0} */
} cli_cmd;

/* Parses argv (argv[0] is the subcommand name) into common + cmd->opts, collecting
 * positional arguments into pos (at most max_pos, more is an error). Exits on error
 * (status 2) or help (status 0). Returns the number of positional arguments. */
int cli_parse(const cli_cmd *cmd, cli_common *common, int argc, char **argv,
              const char **pos, int max_pos);

/* Prints "llmchat CMD: MESSAGE" to stderr and exits with status 2. */
_Noreturn void cli_usage_error(const cli_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parses "512M"-style sizes; false on a malformed value. */
bool cli_parse_size(const char *s, int64_t *out);

#endif
