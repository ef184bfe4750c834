/* cli.c — option parsing, value checking and help text for all subcommands. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const g_devices[] = {"auto", "cpu", "cuda", NULL};
static const char *const g_kv_types[] = {"f32", "f16", "q8_0", NULL};

/* The shared options, bound to a cli_common at parse time. */
static void common_opts(cli_common *c, cli_opt out[14]) {
    cli_opt opts[14] = {
        {"model", 'm', CLI_STR, &c->model, "PATH", "GGUF model file", 0, 0, NULL},
        {"threads", 0, CLI_INT, &c->threads, "N", "CPU threads (default: all cores)", 0, 1024,
         NULL},
        {"device", 0, CLI_CHOICE, &c->device, "DEV", "auto, cpu or cuda (default auto)", 0, 0,
         g_devices},
        {"db", 0, CLI_STR, &c->db, "PATH", "conversation database", 0, 0, NULL},
        {"socket", 0, CLI_STR, &c->socket, "PATH", "local socket for editors and tools", 0, 0,
         NULL},
        {"kv-mem", 0, CLI_SIZE, &c->kv_mem, "SIZE", "KV cache memory, e.g. 512M (default auto)",
         0, 0, NULL},
        {"kv-type", 0, CLI_CHOICE, &c->kv_type, "TYPE", "KV cache element type: f32, f16 or q8_0 (default f16)",
         0, 0, g_kv_types},
        {"draft", 0, CLI_STR, &c->draft, "PATH", "draft model for speculative decoding (same vocabulary)",
         0, 0, NULL},
        {"draft-max", 0, CLI_INT, &c->draft_max, "N", "most tokens drafted per step (default 8)", 1, 32, NULL},
        {"draft-min", 0, CLI_INT, &c->draft_min, "N", "fewest tokens drafted per step (default 1)", 1, 32, NULL},
        {"draft-p-min", 0, CLI_FLOAT, &c->draft_p_min, "P",
         "the draft stops below this probability (default 0.5)", 0, 1, NULL},
        {"ngram", 0, CLI_FLAG, &c->ngram, NULL, "speculate with n-gram lookups in the text (no draft model)",
         0, 0, NULL},
        {"no-warmup", 0, CLI_FLAG, &c->no_warmup, NULL,
         "skip the short forward pass at load that makes the first answer fast", 0, 0, NULL},
        {0},
    };
    memcpy(out, opts, sizeof opts);
}

const char *cli_default_model(void) {
    const char *env = getenv("LLMCHAT_MODEL");
    if (env && *env) return env;
    static char path[PATH_MAX];
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        /* <checkout>/build/llmchat → <checkout>/../shared/models/... */
        for (int up = 0; up < 2; up++) {
            char *slash = strrchr(exe, '/');
            if (slash) *slash = 0;
        }
        int w = snprintf(path, sizeof path, "%.*s/../shared/models/stories260K.gguf",
                         (int)(sizeof path - 64), exe);
        if (w > 0 && (size_t)w < sizeof path && access(path, R_OK) == 0) return path;
    }
    return "../shared/models/stories260K.gguf";
}

void cli_usage_error(const cli_cmd *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "llmchat%s%s: ", cmd ? " " : "", cmd ? cmd->name : "");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'llmchat%s%s --help')\n", cmd ? " " : "", cmd ? cmd->name : "");
    va_end(ap);
    exit(2);
}

bool cli_parse_size(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0 || !isfinite(v)) return false;
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end) return false;
    v *= mult;
    if (v > 9.0e18) return false;
    *out = (int64_t)v;
    return true;
}

static void print_opt(const cli_opt *o) {
    char left[64];
    int n = o->short_name ? snprintf(left, sizeof left, "  -%c, --%s", o->short_name, o->name)
                          : snprintf(left, sizeof left, "      --%s", o->name);
    if (o->kind != CLI_FLAG && n > 0 && (size_t)n < sizeof left)
        snprintf(left + n, sizeof left - (size_t)n, " %s", o->metavar ? o->metavar : "VALUE");
    printf("%-28s %s\n", left, o->help ? o->help : "");
}

static void print_help(const cli_cmd *cmd, const cli_opt *common) {
    printf("usage: llmchat %s %s\n\n", cmd->name, cmd->usage);
    printf("%s\n\noptions:\n", cmd->summary);
    for (const cli_opt *o = cmd->opts; o && o->name; o++) print_opt(o);
    printf("\ncommon options:\n");
    for (const cli_opt *o = common; o->name; o++) print_opt(o);
    printf("  -h, --help                 show this help\n");
}

static void set_value(const cli_cmd *cmd, const cli_opt *o, const char *val) {
    char *end;
    errno = 0;
    switch (o->kind) {
    case CLI_FLAG: *(bool *)o->dst = true; return;
    case CLI_STR: *(const char **)o->dst = val; return;
    case CLI_CHOICE:
        for (const char *const *c = o->choices; *c; c++)
            if (!strcmp(*c, val)) {
                *(const char **)o->dst = *c;
                return;
            }
        cli_usage_error(cmd, "--%s: '%s' is not one of the accepted values", o->name, val);
    case CLI_SIZE:
        if (!cli_parse_size(val, (int64_t *)o->dst))
            cli_usage_error(cmd, "--%s: '%s' is not a size (like 512M or 2G)", o->name, val);
        return;
    case CLI_INT:
    case CLI_I64: {
        long long v = strtoll(val, &end, 10);
        if (end == val || *end || errno)
            cli_usage_error(cmd, "--%s: '%s' is not an integer", o->name, val);
        if (o->min != o->max && (v < o->min || v > o->max))
            cli_usage_error(cmd, "--%s: %lld is outside %.0f..%.0f", o->name, v, o->min, o->max);
        if (o->kind == CLI_INT) {
            if (v < INT_MIN || v > INT_MAX) cli_usage_error(cmd, "--%s: %s is too large", o->name, val);
            *(int *)o->dst = (int)v;
        } else {
            *(int64_t *)o->dst = v;
        }
        return;
    }
    case CLI_FLOAT: {
        double v = strtod(val, &end);
        if (end == val || *end || errno || !isfinite(v))
            cli_usage_error(cmd, "--%s: '%s' is not a number", o->name, val);
        if (o->min != o->max && (v < o->min || v > o->max))
            cli_usage_error(cmd, "--%s: %g is outside %g..%g", o->name, v, o->min, o->max);
        *(float *)o->dst = (float)v;
        return;
    }
    }
}

static const cli_opt *find_long(const cli_opt *a, const cli_opt *b, const char *name, size_t len) {
    const cli_opt *lists[2] = {a, b};
    for (int l = 0; l < 2; l++)
        for (const cli_opt *o = lists[l]; o && o->name; o++)
            if (strlen(o->name) == len && !strncmp(o->name, name, len)) return o;
    return NULL;
}

static const cli_opt *find_short(const cli_opt *a, const cli_opt *b, char c) {
    const cli_opt *lists[2] = {a, b};
    for (int l = 0; l < 2; l++)
        for (const cli_opt *o = lists[l]; o && o->name; o++)
            if (o->short_name == c) return o;
    return NULL;
}

int cli_parse(const cli_cmd *cmd, cli_common *common, int argc, char **argv,
              const char **pos, int max_pos) {
    cli_opt copts[14];
    common_opts(common, copts);
    if (!common->device) common->device = "auto";
    int npos = 0;
    bool opts_done = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const cli_opt *o = NULL;
        const char *val = NULL;
        if (!opts_done && !strcmp(arg, "--")) {
            opts_done = true;
            continue;
        }
        if (!opts_done && (!strcmp(arg, "-h") || !strcmp(arg, "--help"))) {
            print_help(cmd, copts);
            exit(0);
        }
        if (!opts_done && arg[0] == '-' && arg[1] == '-') {
            const char *name = arg + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(cmd->opts, copts, name, len);
            if (!o) cli_usage_error(cmd, "unknown option '--%.*s'", (int)len, name);
            if (eq) {
                if (o->kind == CLI_FLAG) cli_usage_error(cmd, "--%s takes no value", o->name);
                val = eq + 1;
            }
        } else if (!opts_done && arg[0] == '-' && arg[1] && arg[1] != '-' &&
                   !(arg[1] >= '0' && arg[1] <= '9')) {
            o = find_short(cmd->opts, copts, arg[1]);
            if (!o) cli_usage_error(cmd, "unknown option '-%c'", arg[1]);
            if (arg[2]) {
                if (o->kind == CLI_FLAG) cli_usage_error(cmd, "unknown option '%s'", arg);
                val = arg + 2;
            }
        } else {
            if (npos >= max_pos)
                cli_usage_error(cmd, "unexpected argument '%s'", arg);
            pos[npos++] = arg;
            continue;
        }
        if (o->kind != CLI_FLAG && !val) {
            if (i + 1 >= argc) cli_usage_error(cmd, "--%s needs a value", o->name);
            val = argv[++i];
        }
        set_value(cmd, o, val);
    }
    common->model_given = common->model != NULL;
    if (!common->model) common->model = cli_default_model();
    return npos;
}
