/* tok_pretok.c — the BPE pre-tokenizer: which regexes each tokenizer.ggml.pre
 * type uses (the lists of llama.cpp's llm_tokenizer_bpe) and what else the type
 * implies (tok_pre_flags), their compilation with PCRE2, and splitting text into
 * words with them.
 *
 * Semantics, as llama.cpp's unicode_regex_split: the regexes apply in order; each
 * one splits every piece left by the previous one into its matches and the
 * unmatched gaps between them (both kept, empty ones dropped). Lookarounds and $
 * see only the piece being split.
 *
 * llama.cpp runs these through std::regex (ASCII \s \d \b) on text whose
 * non-ASCII characters are collapsed to one representative per Unicode category,
 * or through hand-written matchers. To reproduce that with PCRE2:
 *   - patterns compile with PCRE2_UTF but not PCRE2_UCP, so \d \w \b stay ASCII,
 *     while \p{..} still uses Unicode properties;
 *   - \s / \S are rewritten to the Unicode White_Space set llama.cpp uses
 *     (PCRE2's own \s lacks U+0085);
 *   - \p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo} are rewritten to \p{L}: llama.cpp
 *     collapses them all to "letter";
 *   - $ matches only at the very end (PCRE2_DOLLAR_ENDONLY), as in ECMAScript.
 * Known difference: llama.cpp's collapsed table leaves '~' out of \p{S}; here it is
 * a symbol, as in Unicode (affects deepseek-v3 style patterns only).
 *
 * Input need not be valid UTF-8: each invalid byte is matched as U+FFFD (as
 * llama.cpp does) but the words returned keep the original bytes. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer/tok_internal.h"

#define MAX_REGEX 8

struct tok_pretok {
    const char *name; /* the type's canonical name */
    int n;
    pcre2_code *re[MAX_REGEX];
};

/* ---- the regexes (llama.cpp's adapted forms) ---- */

#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

#define R_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define R_LLAMA3                                                                              \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_QWEN2                                                                            \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_QWEN35                                                                                 \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|" \
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_JAIS2                                                                              \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
                 "\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|"  \
                 "\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"
#define R_PORO " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"
#define R_CJK_DS "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
#define R_CJK_KANA "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+"
#define R_DS_LETTERS                                                                           \
    "\\s?[A-Za-z"                                                                              \
    "\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"     \
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}-\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}"       \
    "\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}"               \
    "\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"                   \
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"               \
    "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"               \
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"       \
    "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"      \
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}"               \
    "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"       \
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}"       \
    "\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}-\\x{2184}"               \
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}-\\x{2CF3}"               \
    "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"               \
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"               \
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"           \
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"       \
    "\\x{1E900}-\\x{1E943}]+"
#define R_DS_PUNCT \
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+"
#define R_DS3_MAIN                                                                          \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?"     \
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_SPARK_MAIN                                                                        \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?"     \
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\\r\\n]|\\s+(?!\\S)|\\s+"
#define UPPER_RUN "((?=[\\p{L}])([^a-z]))"
#define LOWER_RUN "((?=[\\p{L}])([^A-Z]))"
#define R_TEKKEN                                                                     \
    "[^\\r\\n\\p{L}\\p{N}]?" UPPER_RUN "*" LOWER_RUN "+|[^\\r\\n\\p{L}\\p{N}]?" UPPER_RUN \
    "+" LOWER_RUN "*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_GPT4O                                                                               \
    "[^\\r\\n\\p{L}\\p{N}]?" UPPER_RUN "*" LOWER_RUN "+" CONTRACTIONS                          \
    "?|[^\\r\\n\\p{L}\\p{N}]?" UPPER_RUN "+" LOWER_RUN "*" CONTRACTIONS                        \
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define UPPER_RUN_M "((?=[\\p{L}\\p{M}])([^a-z]))"
#define LOWER_RUN_M "((?=[\\p{L}\\p{M}])([^A-Z]))"
#define R_GRANITE_MULTI                                                                       \
    "[^\\r\\n\\p{L}\\p{N}]?" UPPER_RUN_M "*" LOWER_RUN_M "+" CONTRACTIONS                      \
    "?|[^\\r\\n\\p{L}\\p{N}]?" UPPER_RUN_M "+" LOWER_RUN_M "*" CONTRACTIONS                    \
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define CASED_WORDS                                                                          \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" \
    CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"             \
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" CONTRACTIONS "?"
#define R_TINY_AYA \
    CASED_WORDS "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_YOUTU \
    CASED_WORDS "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_YOUTU_CJK                                                                          \
    "[\\x{AC00}-\\x{D7A3}\\x{3131}-\\x{318E}]+|[\\x{FF01}\\x{2026}\\x{201C}\\x{201D}\\x{2018}" \
    "\\x{2019}\\x{2014}\\x{FF1A}\\x{FF1B}\\x{FF0C}\\x{3001}-\\x{303F}\\x{FE30}-\\x{FE4F}]+|"  \
    "[\\x{3105}-\\x{312F}]+|" R_CJK_KANA
#define R_BAILING                                                                         \
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"   \
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"
#define R_SEED_CODER                                                                         \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|"    \
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_UFAKZEKA \
    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_MINICPM5                                                                          \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_EXAONE_MOE                                                                         \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}|"     \
                 " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"

typedef struct pre_type {
    const char *name;
    const char *regex[MAX_REGEX];
    bool ignore_merges, add_bos, bos_none;
} pre_type;

/* SPM-style BPE (gemma4, sarvam-moe): spaces are escaped to U+2581 and merges run
 * over UTF-8 characters of whole lines; only runs of newlines are split off. */
#define R_LINES "[^\\n]+|[\\n]+"

static const pre_type k_types[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", R_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, 0, 0, 0},
    {"llama3", {R_LLAMA3}, true, true, false},
    {"gemma4", {R_LINES}, 0, 0, 0},
    {"sarvam-moe", {R_LINES}, 0, 0, 0},
    {"dbrx", {R_LLAMA3}, 0, 0, 0},
    {"jais-2", {R_JAIS2}, 0, 0, 0},
    {"deepseek-llm", {"[\r\n]", R_DS_LETTERS, R_DS_PUNCT, "\\s+$", R_CJK_DS, "\\p{N}+"}, 0, 0, 0},
    {"deepseek-v3", {"\\p{N}{1,3}", R_CJK_KANA, R_DS3_MAIN}, 0, 0, 0},
    {"spark2_5", {"\\p{N}{1,3}", R_CJK_KANA, R_SPARK_MAIN, "\\p{N}"}, 0, 0, 0},
    {"youtu", {R_YOUTU_CJK, R_YOUTU}, true, false, false},
    {"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", R_CJK_DS, "\\p{N}"}, 0, 0, 0},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", R_GPT2, "[0-9][0-9][0-9]"}, 0, 0, 0},
    {"starcoder", {"\\p{N}", R_GPT2}, 0, 0, 0},
    {"gpt-2", {R_GPT2}, 0, 0, 0},
    {"qwen2", {R_QWEN2}, 0, 0, 0},
    {"qwen35", {R_QWEN35}, 0, 0, 0},
    {"poro-chat", {R_PORO}, 0, 0, 0},
    {"chatglm-bpe", {R_LLAMA3}, false, false, true},
    {"viking", {R_PORO, "\\p{N}"}, 0, 0, 0},
    {"tekken", {R_TEKKEN}, true, true, false},
    {"chameleon",
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", R_GPT2},
     false, true, false},
    {"gpt-4o", {R_GPT4O}, 0, 0, 0},
    {"granite-embed-multi-97m", {R_GRANITE_MULTI}, true, false, false},
    {"tiny_aya", {"\\d{1,3}(?=(?:\\d{3})*\\b)", R_TINY_AYA}, 0, 0, 0},
    {"superbpe", {"\\p{N}+", "(?=(\\d{3})+(?!\\d))"}, 0, 0, 0},
    {"bailingmoe", {R_BAILING}, 0, 0, 0},
    {"seed-coder", {R_SEED_CODER}, 0, 0, 0},
    {"ufakzeka", {R_UFAKZEKA}, 0, 0, 0},
    {"laguna", {"[^\\n]+|[\\n]+", R_QWEN2}, 0, 0, 0},
    {"minicpm5", {"\\p{N}{1,3}", R_MINICPM5}, true, false, false},
    {"exaone-moe", {R_EXAONE_MOE}, 0, 0, 0},
};

/* The types' rarer settings. */
static const struct {
    const char *type;
    tok_pre_flags flags;
} k_more[] = {
    {"gemma4", {.raw_utf8 = true, .escape_ws = true, .force_bos = true, .newline_runs = true}},
    {"sarvam-moe", {.raw_utf8 = true, .escape_ws = true}},
};

/* tokenizer.ggml.pre value -> canonical type name above (llama.cpp's aliases). */
static const struct {
    const char *alias, *type;
} k_alias[] = {
    {"llama-v3", "llama3"},         {"llama-bpe", "llama3"},       {"falcon3", "llama3"},
    {"falcon-h1", "llama3"},        {"pixtral", "llama3"},         {"midm-2.0", "llama3"},
    {"lfm2", "llama3"},             {"jina-v5-nano", "llama3"},    {"smaug-bpe", "dbrx"},
    {"hunyuan-dense", "deepseek-v3"}, {"joyai-llm", "deepseek-v3"}, {"hy_v4", "deepseek-v3"},
    {"refact", "starcoder"},        {"command-r", "starcoder"},    {"smollm", "starcoder"},
    {"codeshell", "starcoder"},     {"exaone", "starcoder"},       {"minerva-7b", "starcoder"},
    {"mellum2", "starcoder"},       {"mpt", "gpt-2"},              {"olmo", "gpt-2"},
    {"jais", "gpt-2"},              {"trillion", "gpt-2"},         {"granite-docling", "gpt-2"},
    {"phi-2", "gpt-2"},             {"jina-es", "gpt-2"},          {"jina-de", "gpt-2"},
    {"gigachat", "gpt-2"},          {"jina-v2-es", "gpt-2"},       {"jina-v2-de", "gpt-2"},
    {"a.x-4.0", "gpt-2"},           {"mellum", "gpt-2"},           {"modern-bert", "gpt-2"},
    {"jina-v1-en", "gpt-2"},        {"jina-v2-code", "gpt-2"},     {"roberta-bpe", "gpt-2"},
    {"exaone4", "gpt-2"},           {"deepseek-r1-qwen", "qwen2"}, {"kormo", "qwen2"},
    {"f2llmv2", "qwen2"},           {"megrez", "qwen2"},           {"stablelm2", "qwen2"},
    {"hunyuan", "qwen2"},           {"solar-open", "qwen2"},       {"grok-2", "qwen2"},
    {"bloom", "poro-chat"},         {"gpt3-finnish", "poro-chat"}, {"glm4", "chatglm-bpe"},
    {"llama4", "gpt-4o"},           {"kanana2", "gpt-4o"},         {"talkie", "gpt-4o"},
    {"minimax-m2", "gpt-4o"},       {"cohere2moe", "tiny_aya"},    {"bailingmoe2", "bailingmoe"},
    {"llada-moe", "bailingmoe"},    {"granite-embed-multi-311m", "gemma4"},
};

/* Pre-tokenizers llama.cpp implements with custom code. */
static const char *const k_unsupported[] = {
    "whitespace", "kimi-k2", "afmoe",
};

#define WS_SET "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

/* Rewrites a llama.cpp pattern for PCRE2 (see the file comment). */
static char *rewrite(const char *src) {
    size_t n = strlen(src), cap = n * 8 + 64;
    char *o = malloc(cap);
    if (!o) return NULL;
    size_t k = 0;
    bool inside = false;
#define PUT(str)                           \
    do {                                   \
        size_t l_ = strlen(str);           \
        if (k + l_ + 1 > cap) goto fail;   \
        memcpy(o + k, str, l_);            \
        k += l_;                           \
    } while (0)
    for (size_t i = 0; i < n; i++) {
        char c = src[i];
        if (c == '\\' && i + 1 < n) {
            char d = src[i + 1];
            if (d == 's') {
                PUT(inside ? WS_SET : "[" WS_SET "]");
                i++;
                continue;
            }
            if (d == 'S') {
                if (inside) goto fail; /* not expressible; no pattern needs it */
                PUT("[^" WS_SET "]");
                i++;
                continue;
            }
            if (d == 'p' && i + 5 < n && src[i + 2] == '{' && src[i + 3] == 'L' &&
                strchr("ultmo", src[i + 4]) && src[i + 5] == '}') {
                PUT("\\p{L}");
                i += 5;
                continue;
            }
            char two[3] = {c, d, 0};
            PUT(two);
            i++;
            continue;
        }
        if (c == '[' && !inside) {
            inside = true;
            if (i + 1 < n && src[i + 1] == '^') {
                PUT("[^");
                i++;
            } else {
                PUT("[");
            }
            continue;
        }
        if (c == ']' && inside) inside = false;
        char one[2] = {c, 0};
        PUT(one);
    }
#undef PUT
    o[k] = 0;
    return o;
fail:
    free(o);
    return NULL;
}

const char *tok_pretok_name(const tok_pretok *p) { return p ? p->name : NULL; }

void tok_pretok_free(tok_pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->re[i]);
    free(p);
}

static bool name_is(const char *pre, size_t len, const char *name) {
    return strlen(name) == len && memcmp(pre, name, len) == 0;
}

int tok_pretok_create(const char *pre, size_t pre_len, tok_pretok **out, tok_pre_flags *flags,
                      llc_err *err) {
    *out = NULL;
    const pre_type *ty = NULL;
    if (!pre) {
        ty = &k_types[0]; /* missing: llama.cpp's "default" */
    } else {
        for (size_t i = 0; i < LLC_ARRAY_LEN(k_unsupported); i++)
            if (name_is(pre, pre_len, k_unsupported[i]))
                return llc_fail(err, LLC_ERR_UNSUPPORTED,
                                "tokenizer: pre-tokenizer '%s' is not supported", k_unsupported[i]);
        const char *canon = NULL;
        for (size_t i = 0; i < LLC_ARRAY_LEN(k_alias) && !canon; i++)
            if (name_is(pre, pre_len, k_alias[i].alias)) canon = k_alias[i].type;
        for (size_t i = 0; i < LLC_ARRAY_LEN(k_types) && !ty; i++)
            if (canon ? !strcmp(canon, k_types[i].name) : name_is(pre, pre_len, k_types[i].name))
                ty = &k_types[i];
        /* Unknown types (llama.cpp refuses them) fall back to GPT-2's regex, which
         * splits words, numbers, punctuation and whitespace sensibly. */
        if (!ty) flags->unknown = true;
        for (size_t i = 0; i < LLC_ARRAY_LEN(k_types) && !ty; i++)
            if (!strcmp(k_types[i].name, "gpt-2")) ty = &k_types[i];
    }
    tok_pretok *p = calloc(1, sizeof *p);
    if (!p) return llc_fail(err, LLC_ERR_NOMEM, "tokenizer: out of memory");
    p->name = ty->name;
    for (int i = 0; i < MAX_REGEX && ty->regex[i]; i++) {
        char *pat = rewrite(ty->regex[i]);
        if (!pat) {
            tok_pretok_free(p);
            return llc_fail(err, LLC_ERR_NOMEM, "tokenizer: cannot prepare regex of '%s'", ty->name);
        }
        int ecode;
        PCRE2_SIZE eoff;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &ecode, &eoff, NULL);
        free(pat);
        if (!re) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(ecode, msg, sizeof msg);
            tok_pretok_free(p);
            return llc_fail(err, LLC_ERR_UNSUPPORTED, "tokenizer: regex %d of '%s': %s at %zu", i,
                            ty->name, (const char *)msg, (size_t)eoff);
        }
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
        p->re[p->n++] = re;
    }
    if (ty->ignore_merges) flags->ignore_merges = true;
    if (ty->add_bos) flags->add_bos = true;
    if (ty->bos_none) flags->bos_none = true;
    for (size_t i = 0; i < LLC_ARRAY_LEN(k_more); i++) {
        if (strcmp(k_more[i].type, ty->name)) continue;
        const tok_pre_flags *m = &k_more[i].flags;
        if (m->force_bos) flags->force_bos = true;
        if (m->raw_utf8) flags->raw_utf8 = true;
        if (m->escape_ws) flags->escape_ws = true;
        if (m->newline_runs) flags->newline_runs = true;
    }
    *out = p;
    return 0;
}

/* ---- splitting ---- */

typedef struct spans {
    tok_span *v;
    size_t n, cap;
} spans;

static bool spans_push(spans *s, size_t a, size_t b) {
    if (a >= b) return true;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        tok_span *v = realloc(s->v, nc * sizeof *v);
        if (!v) return false;
        s->v = v;
        s->cap = nc;
    }
    s->v[s->n++] = (tok_span){a, b};
    return true;
}

/* Length of the (valid) UTF-8 character at s. */
static size_t char_len(const unsigned char *s) {
    return *s < 0x80 ? 1 : *s < 0xE0 ? 2 : *s < 0xF0 ? 3 : 4;
}

/* Splits s[a, b) by one regex into out. */
static bool split_piece(const pcre2_code *re, pcre2_match_data *md, const char *s, size_t a,
                        size_t b, spans *out) {
    const unsigned char *subj = (const unsigned char *)s + a;
    size_t len = b - a, pos = 0, last = 0;
    uint32_t opts = 0;
    while (pos <= len) {
        int rc = pcre2_match(re, subj, len, pos, opts | PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
            /* JIT stack or match limit: retry with the interpreter (heap frames) */
            rc = pcre2_match(re, subj, len, pos, opts | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                             NULL);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (!opts) break;
            /* no non-empty match where the empty one was: step one character */
            if (pos >= len) break;
            pos += char_len(subj + pos);
            opts = 0;
            continue;
        }
        if (rc < 0) break; /* give up on this piece: the rest stays one word */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (ms < last || me < ms || me > len) break; /* \K tricks: none of ours */
        if (!spans_push(out, a + last, a + ms) || !spans_push(out, a + ms, a + me)) return false;
        last = me;
        pos = me;
        opts = me == ms ? PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED : 0;
    }
    return spans_push(out, a + last, a + len);
}

int tok_pretok_split(const tok_pretok *p, const char *text, size_t len, tok_span **words,
                     size_t *n_words) {
    *words = NULL;
    *n_words = 0;
    if (!len) return 0;
    /* sanitize: invalid bytes -> U+FFFD; remember where (s offsets) */
    const unsigned char *u = (const unsigned char *)text;
    size_t n_bad = 0;
    for (size_t i = 0; i < len;) {
        int l = tok_utf8_valid_len(u + i, len - i);
        if (!l) n_bad++, l = 1;
        i += (size_t)l;
    }
    const char *s = text;
    char *owned = NULL;
    size_t *bad = NULL, slen = len;
    if (n_bad) {
        slen = len + 2 * n_bad;
        owned = malloc(slen);
        bad = malloc(n_bad * sizeof *bad);
        if (!owned || !bad) {
            free(owned);
            free(bad);
            return LLC_ERR_NOMEM;
        }
        size_t k = 0, nb = 0;
        for (size_t i = 0; i < len;) {
            int l = tok_utf8_valid_len(u + i, len - i);
            if (!l) {
                bad[nb++] = k;
                memcpy(owned + k, "\xEF\xBF\xBD", 3);
                k += 3;
                i++;
            } else {
                memcpy(owned + k, text + i, (size_t)l);
                k += (size_t)l;
                i += (size_t)l;
            }
        }
        s = owned;
    }

    int rc = 0;
    spans cur = {0}, next = {0};
    if (!spans_push(&cur, 0, slen)) rc = LLC_ERR_NOMEM;
    for (int r = 0; r < p->n && !rc; r++) {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(p->re[r], NULL);
        if (!md) {
            rc = LLC_ERR_NOMEM;
            break;
        }
        next.n = 0;
        for (size_t i = 0; i < cur.n && !rc; i++)
            if (!split_piece(p->re[r], md, s, cur.v[i].start, cur.v[i].end, &next))
                rc = LLC_ERR_NOMEM;
        pcre2_match_data_free(md);
        spans t = cur;
        cur = next;
        next = t;
    }
    free(next.v);
    if (!rc && n_bad) {
        /* map s offsets back: orig = s - 2 * (replacements starting before s) */
        size_t nb = 0;
        for (size_t i = 0; i < cur.n; i++) {
            tok_span *w = &cur.v[i];
            while (nb < n_bad && bad[nb] < w->start) nb++;
            w->start -= 2 * nb;
            size_t ne = nb;
            while (ne < n_bad && bad[ne] < w->end) ne++;
            w->end -= 2 * ne;
        }
    }
    free(owned);
    free(bad);
    if (rc) {
        free(cur.v);
        return rc;
    }
    *words = cur.v;
    *n_words = cur.n;
    return 0;
}
