/* highlight.c — the syntax colours of code blocks (see highlight.h): one table
 * row per language (its names, words, comment and string markers, a few
 * flags), one scanner for all of them; the words of all of them in one hash
 * table built at the first use (pthread_once). */
#include "ui/highlight.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

enum {
    F_NOCASE = 1,      /* keywords in any case (SQL) */
    F_HASH_WORD = 2,   /* the line comment starts only a word (shell: $# and a#b are not comments) */
    F_DOLLAR = 4,      /* $VAR, ${VAR}, $1 are variables (shell) */
    F_CHAR_QUOTE = 8,  /* ' opens only a character literal: 'x', '\n' (Rust's 'a lifetimes are not) */
    F_PREPROC = 16,    /* # at a line's start is a directive, <file> after it a string (C) */
    F_KEY_COLON = 32,  /* a word at the line's start followed by ':' is a key (YAML) */
};

/* States between lines: 0 plain, 1 in a block comment, 2 + k in multi-line string k. */
enum { ST_PLAIN, ST_COMMENT, ST_STRING };

struct hl_lang {
    const char *name;
    const char *aliases; /* space-separated, lower case, the name first */
    const char *keywords, *types;
    const char *line_comment, *block_open, *block_close;
    const char *quotes;  /* strings that end on their line */
    const char *ml[2];   /* strings that may span lines (the same delimiter closes them) */
    unsigned flags;
};

#define C_KW "auto break case const continue default do else enum extern for goto if inline register " \
             "restrict return sizeof static struct switch typedef union volatile while _Alignas _Alignof " \
             "_Atomic _Generic _Noreturn _Static_assert _Thread_local"
#define C_TYPES "void char short int long float double signed unsigned bool _Bool size_t ssize_t " \
                "int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t uintptr_t intptr_t " \
                "ptrdiff_t FILE NULL true false"
#define CPP_KW C_KW " alignas alignof catch class constexpr consteval constinit co_await co_return " \
                    "co_yield decltype delete explicit friend mutable namespace new noexcept operator private " \
                    "protected public static_assert template this throw try typeid typename using virtual " \
                    "override final concept requires"
#define CPP_TYPES C_TYPES " auto wchar_t char8_t char16_t char32_t nullptr std string vector map " \
                          "unique_ptr shared_ptr"
#define JS_KW "async await break case catch class const continue debugger default delete do else export " \
              "extends finally for from function if import in instanceof let new of return static super " \
              "switch this throw try typeof var void while with yield"
#define JS_TYPES "true false null undefined NaN Infinity console window document Object Array String " \
                 "Number Boolean Promise Map Set JSON Math Error"

static const hl_lang g_langs[] = {
    {"c", "c h", C_KW, C_TYPES, "//", "/*", "*/", "\"'", {0}, F_PREPROC},
    {"cpp", "cpp c++ cc cxx hpp hh hxx cuda cu", CPP_KW, CPP_TYPES, "//", "/*", "*/", "\"'", {0}, F_PREPROC},
    {"python", "python py python3 py3 ipython",
     "and as assert async await break class continue def del elif else except finally for from global if "
     "import in is lambda nonlocal not or pass raise return try while with yield match case",
     "True False None self cls int float str bool list dict set tuple bytes object type print len range "
     "open isinstance super Exception",
     "#", NULL, NULL, "\"'", {"\"\"\"", "'''"}, 0},
    {"javascript", "javascript js jsx mjs cjs node", JS_KW, JS_TYPES, "//", "/*", "*/", "\"'", {"`"}, 0},
    {"typescript", "typescript ts tsx",
     JS_KW " abstract as declare enum implements interface keyof namespace private protected public readonly "
           "type satisfies",
     JS_TYPES " any boolean never number object string symbol unknown void bigint Record Partial",
     "//", "/*", "*/", "\"'", {"`"}, 0},
    {"sh", "sh bash shell zsh console shellsession ksh dash",
     "if then else elif fi for while until do done case esac in function return local export readonly "
     "declare set unset shift exit break continue select time",
     "echo printf cd test read source eval exec trap true false",
     "#", NULL, NULL, "\"'", {0}, F_HASH_WORD | F_DOLLAR},
    {"json", "json jsonc json5 jsonl", "", "true false null", "//", "/*", "*/", "\"", {0}, 0},
    {"rust", "rust rs",
     "as async await break const continue crate dyn else enum extern fn for if impl in let loop match mod "
     "move mut pub ref return static struct super trait type unsafe use where while",
     "self Self true false i8 i16 i32 i64 i128 isize u8 u16 u32 u64 u128 usize f32 f64 bool char str "
     "String Vec Option Some None Result Ok Err Box",
     "//", "/*", "*/", "\"'", {0}, F_CHAR_QUOTE},
    {"go", "go golang",
     "break case chan const continue default defer else fallthrough for func go goto if import interface "
     "map package range return select struct switch type var",
     "bool byte complex64 complex128 error float32 float64 int int8 int16 int32 int64 rune string uint "
     "uint8 uint16 uint32 uint64 uintptr true false nil iota append cap len make new panic recover",
     "//", "/*", "*/", "\"'", {"`"}, 0},
    {"java", "java kotlin kt scala",
     "abstract assert break case catch class const continue default do else enum extends final finally "
     "for goto if implements import instanceof interface native new package private protected public "
     "return static strictfp super switch synchronized this throw throws transient try volatile while "
     "var val fun when object",
     "boolean byte char double float int long short void true false null String Integer List Map",
     "//", "/*", "*/", "\"'", {0}, 0},
    {"sql", "sql sqlite postgresql psql mysql",
     "select from where insert into values update set delete create table drop alter add index view join "
     "left right inner outer full on group by order having limit offset union all distinct as and or not "
     "in is null like between case when then else end primary key foreign references default unique "
     "begin commit rollback transaction with returning exists",
     "integer int text real blob varchar char boolean date timestamp count sum avg min max",
     "--", "/*", "*/", "'\"", {0}, F_NOCASE},
    {"yaml", "yaml yml", "", "true false null yes no on off", "#", NULL, NULL, "\"'", {0},
     F_HASH_WORD | F_KEY_COLON},
};

static bool is_ident(unsigned char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
           ch >= 0x80;
}
static bool is_digit(unsigned char ch) { return ch >= '0' && ch <= '9'; }

/* ---- the words of every language, in one hash table built once ---- */

enum { N_LANGS = sizeof g_langs / sizeof *g_langs, KW_SLOTS = 4096, KW_MAX = 32 };
typedef struct kw_slot {
    const char *w; /* NULL: empty */
    uint8_t len, lang, kind;
} kw_slot;
static kw_slot g_kw[KW_SLOTS];
static pthread_once_t g_kw_once = PTHREAD_ONCE_INIT;

static uint32_t kw_hash(const char *w, size_t n, int lang, bool nocase) {
    uint32_t h = 2166136261u ^ (uint32_t)lang;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)w[i];
        if (nocase && ch >= 'A' && ch <= 'Z') ch = (unsigned char)(ch - 'A' + 'a');
        h = (h ^ ch) * 16777619u;
    }
    return h;
}

static kw_slot *kw_slot_of(const char *w, size_t n, int lang, bool nocase) {
    for (uint32_t i = kw_hash(w, n, lang, nocase) % KW_SLOTS;; i = (i + 1) % KW_SLOTS) {
        kw_slot *s = &g_kw[i];
        if (!s->w || (s->lang == lang && s->len == n && (nocase ? !strncasecmp(s->w, w, n) : !memcmp(s->w, w, n))))
            return s;
    }
}

static void kw_add(int lang, const char *list, hl_kind kind) {
    bool nocase = g_langs[lang].flags & F_NOCASE;
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ' ');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        kw_slot *s = kw_slot_of(p, k, lang, nocase);
        if (!s->w && k && k <= KW_MAX) *s = (kw_slot){p, (uint8_t)k, (uint8_t)lang, (uint8_t)kind}; /* (keywords first: they win) */
        if (!e) break;
        p = e + 1;
    }
}

static void kw_build(void) {
    for (int i = 0; i < (int)N_LANGS; i++) {
        kw_add(i, g_langs[i].keywords, HL_KEYWORD);
        kw_add(i, g_langs[i].types, HL_TYPE);
    }
}

/* What the word is in language lang: HL_KEYWORD, HL_TYPE or HL_PLAIN. */
static hl_kind kw_kind(const hl_lang *L, const char *w, size_t n) {
    if (n > KW_MAX) return HL_PLAIN;
    pthread_once(&g_kw_once, kw_build);
    const kw_slot *s = kw_slot_of(w, n, (int)(L - g_langs), L->flags & F_NOCASE);
    return s->w ? (hl_kind)s->kind : HL_PLAIN;
}

/* Whether word (n bytes) is one of list's space-separated words. */
static bool in_list(const char *list, const char *w, size_t n, bool nocase) {
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ' ');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && (nocase ? !strncasecmp(p, w, n) : !memcmp(p, w, n))) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

const hl_lang *hl_find(const char *name, size_t len) {
    if (!name || !len) return NULL;
    for (size_t i = 0; i < sizeof g_langs / sizeof *g_langs; i++)
        if (in_list(g_langs[i].aliases, name, len, true)) return &g_langs[i];
    return NULL;
}

const char *hl_name(const hl_lang *lang) { return lang ? lang->name : ""; }

static bool starts(const char *s, size_t len, size_t i, const char *tok) {
    if (!tok || i >= len || s[i] != tok[0] || !tok[0]) return false; /* (most bytes stop here) */
    size_t n = strlen(tok);
    return i + n <= len && !memcmp(s + i, tok, n);
}

/* Where a string opened before i (delimiter close) ends: the index after its
 * closing delimiter, or 0 when the line ends first. Backslashes escape. */
static size_t string_end(const char *s, size_t len, size_t i, const char *close) {
    for (; i < len; i++) {
        if (s[i] == '\\') {
            i++;
            continue;
        }
        if (starts(s, len, i, close)) return i + strlen(close);
    }
    return 0;
}

typedef struct out {
    hl_emit emit;
    void *ctx;
    size_t plain; /* the start of plain text not yet emitted */
} out;

static void span(out *o, size_t a, size_t b, hl_kind kind) {
    if (a > o->plain) o->emit(o->ctx, o->plain, a - o->plain, HL_PLAIN);
    if (b > a) o->emit(o->ctx, a, b - a, kind);
    o->plain = b;
}

/* A number from i: digits, letters (0x1F, 1e9, 10u), '.', '_', and a sign after an exponent. */
static size_t number_end(const char *s, size_t len, size_t i) {
    bool hex = i + 1 < len && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X');
    while (i < len) {
        char ch = s[i];
        if (is_ident((unsigned char)ch) || ch == '.') i++;
        else if ((ch == '+' || ch == '-') && !hex && (s[i - 1] == 'e' || s[i - 1] == 'E')) i++;
        else break;
    }
    return i;
}

int hl_line(const hl_lang *L, int state, const char *s, size_t len, hl_emit emit, void *ctx) {
    out o = {emit, ctx, 0};
    if (!L) {
        if (len) emit(ctx, 0, len, HL_PLAIN);
        return ST_PLAIN;
    }
    size_t i = 0;
    if (state == ST_COMMENT || (state >= ST_STRING && state < ST_STRING + 2 && L->ml[state - ST_STRING])) {
        const char *close = state == ST_COMMENT ? L->block_close : L->ml[state - ST_STRING];
        size_t e = 0;
        if (state == ST_COMMENT) {
            for (size_t k = 0; k < len && !e; k++)
                if (starts(s, len, k, close)) e = k + strlen(close);
        } else {
            e = string_end(s, len, 0, close);
        }
        if (!e) {
            span(&o, 0, len, state == ST_COMMENT ? HL_COMMENT : HL_STRING);
            return state;
        }
        span(&o, 0, e, state == ST_COMMENT ? HL_COMMENT : HL_STRING);
        i = e;
    }
    size_t lead = 0;
    while (lead < len && (s[lead] == ' ' || s[lead] == '\t')) lead++;
    while (i < len) {
        unsigned char ch = (unsigned char)s[i];
        if (starts(s, len, i, L->line_comment) &&
            (!(L->flags & F_HASH_WORD) || i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
            span(&o, i, len, HL_COMMENT);
            return ST_PLAIN;
        }
        if (starts(s, len, i, L->block_open)) {
            size_t e = 0;
            for (size_t k = i + strlen(L->block_open); k < len && !e; k++)
                if (starts(s, len, k, L->block_close)) e = k + strlen(L->block_close);
            if (!e) {
                span(&o, i, len, HL_COMMENT);
                return ST_COMMENT;
            }
            span(&o, i, e, HL_COMMENT);
            i = e;
            continue;
        }
        int ml = -1;
        for (int k = 0; k < 2 && ml < 0; k++)
            if (starts(s, len, i, L->ml[k])) ml = k;
        if (ml >= 0) {
            size_t e = string_end(s, len, i + strlen(L->ml[ml]), L->ml[ml]);
            if (!e) {
                span(&o, i, len, HL_STRING);
                return ST_STRING + ml;
            }
            span(&o, i, e, HL_STRING);
            i = e;
            continue;
        }
        if (ch && L->quotes && strchr(L->quotes, ch)) {
            if ((L->flags & F_CHAR_QUOTE) && ch == '\'') { /* 'x' or '\n', else a lifetime ('a) */
                size_t e = i + 1;
                if (e < len && s[e] == '\\') {
                    for (e += 2; e < len && s[e] != '\'' && e < i + 12; e++) {}
                } else if (e < len) {
                    for (e++; e < len && ((unsigned char)s[e] & 0xC0) == 0x80; e++) {}
                }
                if (e >= len || s[e] != '\'') {
                    i++;
                    continue;
                }
                span(&o, i, e + 1, HL_STRING);
                i = e + 1;
                continue;
            }
            char q[2] = {(char)ch, 0};
            size_t e = string_end(s, len, i + 1, q);
            span(&o, i, e ? e : len, HL_STRING);
            i = e ? e : len;
            continue;
        }
        if ((L->flags & F_PREPROC) && ch == '#' && i == lead) { /* #include <x.h> */
            size_t e = i + 1;
            while (e < len && s[e] == ' ') e++;
            while (e < len && is_ident((unsigned char)s[e])) e++;
            span(&o, i, e, HL_KEYWORD);
            i = e;
            while (i < len && s[i] == ' ') i++;
            if (i < len && s[i] == '<') {
                const char *gt = memchr(s + i, '>', len - i);
                if (gt) {
                    span(&o, i, (size_t)(gt - s) + 1, HL_STRING);
                    i = (size_t)(gt - s) + 1;
                }
            }
            continue;
        }
        if ((L->flags & F_DOLLAR) && ch == '$' && i + 1 < len) {
            size_t e = i + 1;
            if (s[e] == '{') {
                const char *cb = memchr(s + e, '}', len - e);
                e = cb ? (size_t)(cb - s) + 1 : len;
            } else if (strchr("@#?*!$-0123456789", s[e])) {
                e++;
            } else {
                while (e < len && is_ident((unsigned char)s[e])) e++;
            }
            if (e > i + 1) {
                span(&o, i, e, HL_TYPE);
                i = e;
                continue;
            }
        }
        if (is_digit(ch) && (i == 0 || !is_ident((unsigned char)s[i - 1]))) {
            size_t e = number_end(s, len, i);
            span(&o, i, e, HL_NUMBER);
            i = e;
            continue;
        }
        if (is_ident(ch)) {
            size_t e = i;
            while (e < len && is_ident((unsigned char)s[e])) e++;
            hl_kind k = (L->flags & F_KEY_COLON) && i == lead && e < len && s[e] == ':' ? HL_KEYWORD
                                                                                      : kw_kind(L, s + i, e - i);
            if (k != HL_PLAIN) span(&o, i, e, k);
            i = e;
            continue;
        }
        i++;
    }
    span(&o, len, len, HL_PLAIN);
    return ST_PLAIN;
}
