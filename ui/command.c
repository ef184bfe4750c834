/* command.c — slash command parsing and the help text (see command.h). */
#include "ui/command.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cmd_def {
    const char *name;
    ui_cmd_kind kind;
    enum { ARG_NONE, ARG_TEXT, ARG_TEXT_REQUIRED, ARG_INT, ARG_INT_OPTIONAL, ARG_SET } arg;
    long long min, max; /* ARG_INT (max LIST_N: a number of the last /sessions or /search list) */
} cmd_def;

#define LIST_N ((long long)1 << 62)

static const cmd_def g_cmds[] = {
    {"system", UI_CMD_SYSTEM, ARG_TEXT, 0, 0},
    {"set", UI_CMD_SET, ARG_SET, 0, 0},
    {"n", UI_CMD_N, ARG_INT, 1, 16},
    {"alt", UI_CMD_ALT, ARG_INT_OPTIONAL, 1, 64},
    {"beam", UI_CMD_BEAM, ARG_INT, 0, 16},
    {"regen", UI_CMD_REGEN, ARG_NONE, 0, 0},
    {"edit", UI_CMD_EDIT, ARG_NONE, 0, 0},
    {"branch", UI_CMD_BRANCH, ARG_TEXT, 0, 0},
    {"rename", UI_CMD_RENAME, ARG_TEXT_REQUIRED, 0, 0},
    {"sessions", UI_CMD_SESSIONS, ARG_TEXT, 0, 0},
    {"open", UI_CMD_OPEN, ARG_INT, 1, LIST_N},
    {"archive", UI_CMD_ARCHIVE, ARG_INT, 1, LIST_N},
    {"unarchive", UI_CMD_UNARCHIVE, ARG_INT, 1, LIST_N},
    {"delete", UI_CMD_DELETE, ARG_INT, 1, LIST_N},
    {"tab", UI_CMD_TAB, ARG_INT, 1, 999},
    {"search", UI_CMD_SEARCH, ARG_TEXT_REQUIRED, 0, 0},
    {"export", UI_CMD_EXPORT, ARG_TEXT, 0, 0},
    {"file", UI_CMD_FILE, ARG_TEXT_REQUIRED, 0, 0},
    {"stats", UI_CMD_STATS, ARG_NONE, 0, 0},
    {"model", UI_CMD_MODEL, ARG_TEXT, 0, 0},
    {"copy", UI_CMD_COPY, ARG_TEXT, 0, 0},
    {"role", UI_CMD_ROLE, ARG_TEXT, 0, 0},
    {"reasoning", UI_CMD_REASONING, ARG_NONE, 0, 0},
    {"think", UI_CMD_THINK, ARG_TEXT_REQUIRED, 0, 0},
    {"new", UI_CMD_NEW, ARG_NONE, 0, 0},
    {"close", UI_CMD_CLOSE, ARG_NONE, 0, 0},
    {"help", UI_CMD_HELP, ARG_NONE, 0, 0},
    {"quit", UI_CMD_QUIT, ARG_NONE, 0, 0},
};

static int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && n) vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The next whitespace-separated word of [*p, end) into word (NUL-terminated). */
static size_t next_word(const char **p, const char *end, char *word, size_t cap) {
    while (*p < end && isspace((unsigned char)**p)) (*p)++;
    size_t n = 0;
    while (*p < end && !isspace((unsigned char)**p)) {
        if (n + 1 < cap) word[n++] = **p;
        (*p)++;
    }
    word[n] = 0;
    return n;
}

static bool parse_ll(const char *s, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno) return false;
    *out = v;
    return true;
}

static bool parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v)) return false;
    *out = v;
    return true;
}

static bool arg_is(const char *p, size_t n, const char *word) { return n == strlen(word) && !memcmp(p, word, n); }

/* The words some text commands take instead of free text. */
static int parse_flag_arg(ui_cmd *out, const char *p, size_t n, char *err, size_t err_size) {
    switch (out->kind) {
    case UI_CMD_COPY: { /* [N] [code [K]]: message N from the top; its (or the last answer's) code block K */
        const char *q = p, *e = p + n;
        char word[24];
        size_t wn = next_word(&q, e, word, sizeof word);
        bool ok = true;
        if (wn && isdigit((unsigned char)word[0])) {
            ok = wn < sizeof word - 1 && parse_ll(word, &out->ivalue) && out->ivalue >= 1;
            wn = next_word(&q, e, word, sizeof word);
        }
        if (ok && wn) {
            ok = !strcmp(word, "code");
            out->block = -1;
            wn = next_word(&q, e, word, sizeof word);
            long long k = 0;
            if (ok && wn) {
                ok = wn < sizeof word - 1 && parse_ll(word, &k) && k >= 1 && k <= 9999;
                out->block = (int)k;
            }
            if (ok) ok = !next_word(&q, e, word, sizeof word);
        }
        if (!ok) {
            out->ivalue = 0, out->block = 0;
            return fail(err, err_size, "/copy: the last answer; /copy code [K] its last code block (or #K); "
                        "/copy N message N; /copy N code [K]");
        }
        break;
    }
    case UI_CMD_ROLE:
        if (n && (n > 64 || memchr(p, ' ', n) || memchr(p, '\t', n)))
            return fail(err, err_size, "/role NAME applies a role of the config file; /role alone lists them");
        break;
    case UI_CMD_SYSTEM:
        out->ivalue = arg_is(p, n, "--clear");
        break;
    case UI_CMD_THINK:
        if (arg_is(p, n, "on")) out->ivalue = 1;
        else if (arg_is(p, n, "off")) out->ivalue = 0;
        else return fail(err, err_size, "/think on|off: whether a thinking model thinks before it answers");
        break;
    case UI_CMD_BRANCH:
        if (arg_is(p, n, "next")) out->ivalue = 1;
        else if (arg_is(p, n, "prev")) out->ivalue = -1;
        else if (n) return fail(err, err_size, "/branch opens a new tab; /branch next|prev shows another version of your message");
        break;
    case UI_CMD_MODEL: { /* a number picks from /model's list; a file named so is ./N */
        size_t digits = 0;
        while (digits < n && isdigit((unsigned char)p[digits])) digits++;
        if (!n || digits < n) break;
        char word[8];
        if (n >= sizeof word || (memcpy(word, p, n), word[n] = 0, !parse_ll(word, &out->ivalue)) || out->ivalue < 1 ||
            out->ivalue > 999) {
            out->ivalue = 0;
            return fail(err, err_size, "/model N: '%.*s' is not an entry of the list (1 to 999; a file named so is ./%.*s)",
                        (int)(n > 20 ? 20 : n), p, (int)(n > 20 ? 20 : n), p);
        }
        break;
    }
    case UI_CMD_SESSIONS:
        if (arg_is(p, n, "--all")) out->ivalue = 1;
        else if (n) return fail(err, err_size, "/sessions lists the sessions; /sessions --all the archived ones too");
        break;
    default: break;
    }
    return 0;
}

static int parse_set(const char *p, const char *end, ui_cmd *out, char *err, size_t n) {
    static const struct { const char *name, *alias; ui_set_key key; bool is_int; double min, max; } keys[] = {
        {"temp", "temperature", UI_SET_TEMP, false, 0, 100},
        {"top_p", "top-p", UI_SET_TOP_P, false, 0, 1},
        {"top_k", "top-k", UI_SET_TOP_K, true, 0, 1e9},
        {"min_p", "min-p", UI_SET_MIN_P, false, 0, 1},
        {"max_tokens", "max-tokens", UI_SET_MAX_TOKENS, true, 1, 1e9},
        {"seed", NULL, UI_SET_SEED, true, 0, 9.2e18},
    };
    char key[32], val[64], extra[8];
    if (!next_word(&p, end, key, sizeof key)) {
        out->key = UI_SET_SHOW;
        return 0;
    }
    if (!next_word(&p, end, val, sizeof val))
        return fail(err, n, "usage: /set temp|top_p|top_k|min_p|max_tokens|seed VALUE (/set alone shows them)");
    if (next_word(&p, end, extra, sizeof extra)) return fail(err, n, "/set takes one value");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (strcmp(key, keys[i].name) && (!keys[i].alias || strcmp(key, keys[i].alias))) continue;
        out->key = keys[i].key;
        if (keys[i].is_int) {
            if (!parse_ll(val, &out->ivalue) || out->ivalue < keys[i].min || out->ivalue > keys[i].max)
                return fail(err, n, "/set %s: '%s' is not a whole number from %.0f", keys[i].name,
                            val, keys[i].min);
        } else if (!parse_double(val, &out->value) || out->value < keys[i].min ||
                   out->value > keys[i].max) {
            return fail(err, n, "/set %s: '%s' is not a number from %g to %g", keys[i].name, val,
                        keys[i].min, keys[i].max);
        }
        return 0;
    }
    return fail(err, n, "/set: unknown setting '%s' (temp, top_p, top_k, min_p, max_tokens, seed)", key);
}

int ui_cmd_parse(const char *text, size_t len, ui_cmd *out, char *err, size_t err_size) {
    memset(out, 0, sizeof *out);
    out->arg = "";
    const char *end = text + len;
    if (len == 0 || text[0] != '/' || (len > 1 && text[1] == '/')) {
        out->kind = UI_CMD_MESSAGE;
        out->arg = len > 1 && text[0] == '/' ? text + 1 : text; /* "//x" sends "/x" */
        out->arg_len = len > 1 && text[0] == '/' ? len - 1 : len;
        return 0;
    }
    const char *p = text + 1;
    char name[32];
    size_t nl = 0;
    while (p < end && !isspace((unsigned char)*p)) {
        if (nl + 1 < sizeof name) name[nl] = *p;
        nl++;
        p++;
    }
    name[nl < sizeof name ? nl : sizeof name - 1] = 0;
    const cmd_def *d = NULL;
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0] && nl < sizeof name; i++)
        if (!strcmp(name, g_cmds[i].name)) d = &g_cmds[i];
    if (!d) return fail(err, err_size, "unknown command '/%.20s' (see /help)", name);
    out->kind = d->kind;
    while (p < end && isspace((unsigned char)*p)) p++;
    const char *arg_end = end;
    while (arg_end > p && isspace((unsigned char)arg_end[-1])) arg_end--;
    size_t arg_len = (size_t)(arg_end - p);
    char word[64];
    switch (d->arg) {
    case ARG_NONE:
        if (arg_len) return fail(err, err_size, "/%s takes no argument", d->name);
        return 0;
    case ARG_TEXT_REQUIRED:
        if (!arg_len) return fail(err, err_size, "/%s needs some text", d->name);
        /* fall through */
    case ARG_TEXT:
        out->arg = p;
        out->arg_len = arg_len;
        return parse_flag_arg(out, p, arg_len, err, err_size);
    case ARG_INT_OPTIONAL:
        if (!arg_len) return 0;
        /* fall through */
    case ARG_INT:
        if (!arg_len) return fail(err, err_size, "/%s needs a number", d->name);
        if (arg_len >= sizeof word || (memcpy(word, p, arg_len), word[arg_len] = 0, !parse_ll(word, &out->ivalue)) ||
            out->ivalue < d->min || out->ivalue > d->max)
            return d->max == LIST_N
                       ? fail(err, err_size, "/%s N: '%.*s' is not an entry (N: a session's number in the last "
                              "/sessions or /search list)", d->name, (int)(arg_len > 20 ? 20 : arg_len), p)
                       : fail(err, err_size, "/%s: '%.*s' is not a whole number from %lld to %lld", d->name,
                              (int)(arg_len > 20 ? 20 : arg_len), p, d->min, d->max);
        return 0;
    case ARG_SET:
        return parse_set(p, arg_end, out, err, err_size);
    }
    return 0;
}

const char *ui_help_text(void) {
    return "Keys\n"
           "  Enter              send          Alt-Enter, Ctrl-J   new line\n"
           "  Ctrl-T  new tab   Alt-W  close tab (session kept)   Ctrl-D (empty input)  close; last tab: quit\n"
           "  Ctrl-PgUp/PgDn, Alt-1..9, Alt-0 (10th)   switch tabs      PgUp/PgDn   scroll\n"
           "  Ctrl-C  stop the answer (none coming: empty the input)   Ctrl-Q quit   Up/Down history\n"
           "  Esc     close the panel and the warnings; leave /edit (your message stays as it was)\n"
           "  Ctrl-A/E line start/end, Ctrl-K/U kill, Ctrl-W or Alt-Backspace word, Ctrl-Y yank, Alt-B/F\n"
           "  Ctrl-X Ctrl-E  edit the input in $EDITOR    Alt-C/Alt-K  copy the last answer/code block\n"
           "          (Alt-K again: the code block before it, and so on)\n"
           "  Mouse   the wheel scrolls, a click on a tab switches to it, a click on a code block's\n"
           "          top border copies the block (Shift-drag selects text; mouse = off in the config\n"
           "          leaves the mouse to the terminal)\n"
           "Commands\n"
           "  /system [TEXT]     show / set the system prompt of this session; /system --clear\n"
           "  /set [temp|top_p|top_k|min_p|max_tokens|seed VALUE]   alone: the values now\n"
           "  /n K               K parallel answers; /alt [K] shows the next (or K-th)\n"
           "  /beam W            beam search of width W (0: sample)\n"
           "  /regen             another answer to the last message (a branch)\n"
           "  /edit              edit your last message: Enter sends a new version, Esc leaves it\n"
           "  /branch next|prev  the other versions of your message (and their answers)\n"
           "  /branch            new tab continuing from here\n"
           "  /rename TITLE      /sessions [--all]  list    /open N  reopen one    /tab N\n"
           "  /archive N         hide session N from /sessions (/unarchive N lists it again)\n"
           "  /delete N          delete session N for good (asks first)\n"
           "  /search TEXT       search every session; /open N opens a hit at its message\n"
           "  /export [FILE.md]  the conversation as Markdown    /file PATH  a text file into the input\n"
           "  /copy [N] [code [K]]  the last answer or message N (from the top); code: its last code\n"
           "                     block, or block K (each block shows #K on its border)\n"
           "  /role [NAME]       apply a role (a named system prompt from the config); alone: list them\n"
           "  /reasoning         show or fold a thinking model's reasoning (Alt-R)\n"
           "  /think on|off      a thinking model thinks first, or answers at once (this tab)\n"
           "  /model [N|PATH]    list models (open, recent, configured, downloaded); N or PATH switches\n"
           "  /stats  /new  /close  /help  /quit\n"
           "  //text             send a message that starts with '/'\n"
           "Config  ~/.config/llmchat/config ($XDG_CONFIG_HOME): key = value lines\n"
           "  temperature, max-tokens, system (defaults of a new tab; \\n is a line break),\n"
           "  role NAME = TEXT (for /role), mouse = on|off, model, other-model, chat-template";
}
