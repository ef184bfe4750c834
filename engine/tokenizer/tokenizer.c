/* tokenizer.c — loading a tokenizer from GGUF metadata (vocabulary, scores, token
 * types, special ids and llama.cpp's fix-ups of them, end-of-generation set), the
 * accessors, and tok_encode: splitting the text around special-token texts
 * (llama.cpp's tokenizer_st_partition) and handing the raw pieces to the SPM or
 * BPE encoder. Pieces/decoding live in tok_decode.c. */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer/tok_internal.h"
#include "engine/tokenizer/tokenizer.h"

#define KEY(x) "tokenizer.ggml." x

/* ---- small helpers ---- */

static bool is_int_type(gguf_type ty) {
    return ty == GGUF_TYPE_UINT8 || ty == GGUF_TYPE_INT8 || ty == GGUF_TYPE_UINT16 ||
           ty == GGUF_TYPE_INT16 || ty == GGUF_TYPE_UINT32 || ty == GGUF_TYPE_INT32 ||
           ty == GGUF_TYPE_UINT64 || ty == GGUF_TYPE_INT64;
}

static bool is_signed_type(gguf_type ty) {
    return ty == GGUF_TYPE_INT8 || ty == GGUF_TYPE_INT16 || ty == GGUF_TYPE_INT32 ||
           ty == GGUF_TYPE_INT64;
}

static int32_t find_text(const tokenizer *t, const char *s) {
    return tok_pool_find(&t->vocab, s, strlen(s));
}

/* Reads an optional token-id key. A value outside the vocabulary is ignored
 * (llama.cpp keeps the default); a non-integer value is an error. */
static int read_id(const gguf *g, const char *key, int32_t n_vocab, int32_t *id, llc_err *err) {
    const gguf_value *v = gguf_find(g, key);
    if (!v) return 0;
    if (!is_int_type(v->type))
        return llc_fail(err, LLC_ERR_TYPE, "tokenizer: %s is a %s, not an integer", key,
                        gguf_type_name(v->type));
    if (is_signed_type(v->type)) {
        if (v->v.i64 >= 0 && v->v.i64 < n_vocab) *id = (int32_t)v->v.i64;
    } else {
        if (v->v.u64 < (uint64_t)n_vocab) *id = (int32_t)v->v.u64;
    }
    return 0;
}

static int read_bool(const gguf *g, const char *key, bool *out, llc_err *err) {
    const gguf_value *v = gguf_find(g, key);
    if (!v) return 0;
    if (v->type != GGUF_TYPE_BOOL)
        return llc_fail(err, LLC_ERR_TYPE, "tokenizer: %s is a %s, not a bool", key,
                        gguf_type_name(v->type));
    *out = v->v.u64 != 0;
    return 0;
}

/* An optional array of n_vocab or more numbers. */
static int read_num_array(const gguf *g, const char *key, bool want_float, uint32_t n_vocab,
                          gguf_array *arr, bool *present, llc_err *err) {
    *present = false;
    const gguf_value *v = gguf_find(g, key);
    if (!v) return 0;
    if (v->type != GGUF_TYPE_ARRAY)
        return llc_fail(err, LLC_ERR_TYPE, "tokenizer: %s is a %s, not an array", key,
                        gguf_type_name(v->type));
    gguf_type et = v->v.arr.elem_type;
    bool ok = is_int_type(et) || (want_float && (et == GGUF_TYPE_FLOAT32 || et == GGUF_TYPE_FLOAT64));
    if (!ok)
        return llc_fail(err, LLC_ERR_TYPE, "tokenizer: %s holds %s elements", key,
                        gguf_type_name(et));
    if (v->v.arr.n < n_vocab)
        return llc_fail(err, LLC_ERR_FORMAT, "tokenizer: %s has %llu entries for %u tokens", key,
                        (unsigned long long)v->v.arr.n, n_vocab);
    *arr = v->v.arr;
    *present = true;
    return 0;
}

static uint16_t attr_of_type(int64_t ty) {
    switch (ty) {
    case 1: return TOK_ATTR_NORMAL;
    case 2: return TOK_ATTR_UNKNOWN;
    case 3: return TOK_ATTR_CONTROL;
    case 4: return TOK_ATTR_USER_DEFINED;
    case 5: return TOK_ATTR_UNUSED;
    case 6: return TOK_ATTR_BYTE;
    default: return TOK_ATTR_UNDEFINED;
    }
}

/* Writes a printable, bounded copy of a metadata string for messages. */
static void safe_name(gguf_str s, char *out, size_t cap) {
    size_t k = 0;
    for (uint64_t i = 0; i < s.len && k + 1 < cap; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        out[k++] = c >= 0x20 && c < 0x7F ? (char)c : '?';
    }
    out[k] = 0;
}

/* ---- special tokens and their fix-ups (llama.cpp's llama_vocab::impl::load) ---- */

/* Token texts llama.cpp recognises when the metadata does not name the id; the
 * first text present wins. Finding one marks it CONTROL. */
static const char *const k_eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
    "<end_of_utterance>", NULL};
static const char *const k_eom_texts[] = {"<|eom_id|>", NULL};
static const char *const k_fim_pre_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const k_fim_suf_texts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const k_fim_mid_texts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const k_fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                              "[PAD]", NULL};
static const char *const k_fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                              "<REPO>", "<reponame>", NULL};
static const char *const k_fim_sep_texts[] = {"<|file_sep|>", NULL};

/* Texts that end generation wherever they are in the vocabulary. */
static const char *const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[e~[", NULL};

static void fallback_by_text(tokenizer *t, tok_special_kind kind, const char *const *texts) {
    if (t->special[kind] >= 0) return;
    for (int i = 0; texts[i]; i++) {
        int32_t id = find_text(t, texts[i]);
        if (id >= 0) {
            t->special[kind] = id;
            t->attr[id] |= TOK_ATTR_CONTROL;
            return;
        }
    }
}

static void fix_specials(tokenizer *t, const char *name_lc, const char *pre) {
    fallback_by_text(t, TOK_SPECIAL_EOT, k_eot_texts);
    fallback_by_text(t, TOK_SPECIAL_EOM, k_eom_texts);
    fallback_by_text(t, TOK_SPECIAL_FIM_PRE, k_fim_pre_texts);
    fallback_by_text(t, TOK_SPECIAL_FIM_SUF, k_fim_suf_texts);
    fallback_by_text(t, TOK_SPECIAL_FIM_MID, k_fim_mid_texts);
    fallback_by_text(t, TOK_SPECIAL_FIM_PAD, k_fim_pad_texts);
    fallback_by_text(t, TOK_SPECIAL_FIM_REP, k_fim_rep_texts);
    fallback_by_text(t, TOK_SPECIAL_FIM_SEP, k_fim_sep_texts);

    /* control tokens named "unused" */
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((t->attr[i] & TOK_ATTR_CONTROL) && strstr(tok_pool_str(&t->vocab, i), "unused"))
            t->attr[i] |= TOK_ATTR_UNUSED;

    /* end of generation */
    static const tok_special_kind fim_eog[] = {TOK_SPECIAL_FIM_PAD, TOK_SPECIAL_FIM_REP,
                                               TOK_SPECIAL_FIM_SEP};
    for (size_t i = 0; i < LLC_ARRAY_LEN(fim_eog); i++)
        if (t->special[fim_eog[i]] >= 0) t->eog[t->special[fim_eog[i]]] = 1;
    for (int i = 0; k_eog_texts[i]; i++) {
        int32_t id = find_text(t, k_eog_texts[i]);
        if (id >= 0) {
            t->eog[id] = 1;
            t->attr[id] |= TOK_ATTR_CONTROL;
        }
    }
    /* gpt-oss: always render these */
    static const char *const harmony_ud[] = {"<|channel|>", "<|message|>", "<|start|>",
                                             "<|constrain|>"};
    for (size_t i = 0; i < LLC_ARRAY_LEN(harmony_ud); i++) {
        int32_t id = find_text(t, harmony_ud[i]);
        if (id >= 0) t->attr[id] = TOK_ATTR_USER_DEFINED;
    }
    static const tok_special_kind eog_kinds[] = {TOK_SPECIAL_EOS, TOK_SPECIAL_EOT, TOK_SPECIAL_EOM};
    for (size_t i = 0; i < LLC_ARRAY_LEN(eog_kinds); i++)
        if (t->special[eog_kinds[i]] >= 0) t->eog[t->special[eog_kinds[i]]] = 1;
    /* o200k_harmony / solar-open: <|end|> is no EOG when <|return|> and <|call|> are */
    {
        int32_t ret = find_text(t, "<|return|>"), call = find_text(t, "<|call|>"),
                calls = find_text(t, "<|calls|>"), flush = find_text(t, "<|flush|>"),
                end = find_text(t, "<|end|>");
        bool has_call = (call >= 0 && t->eog[call]) || (calls >= 0 && t->eog[calls]);
        bool has_ret = ret >= 0 && t->eog[ret], has_flush = flush >= 0 && t->eog[flush];
        if (end >= 0 && t->eog[end] && has_call && (has_ret || has_flush)) {
            t->eog[end] = 0;
            t->attr[end] = TOK_ATTR_USER_DEFINED;
        }
    }
    /* gemma4 / paddleocr: </s> is no EOG next to <|tool_response> */
    {
        int32_t tr = find_text(t, "<|tool_response>"), s = find_text(t, "</s>");
        if (tr >= 0 && s >= 0 && t->eog[tr] && t->eog[s]) {
            t->eog[s] = 0;
            t->attr[s] = TOK_ATTR_NORMAL;
        }
    }

    /* model-specific strip flags */
    if (strstr(pre, "jina-v2-de") || strstr(pre, "jina-v2-es") || strstr(pre, "jina-v2-code")) {
        int32_t id = find_text(t, "<mask>");
        if (id >= 0) t->attr[id] |= TOK_ATTR_LSTRIP;
    } else if (strstr(name_lc, "phi-3") || strstr(name_lc, "phi3")) {
        for (int32_t i = 0; i < t->n_vocab; i++)
            if (t->attr[i] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN))
                t->attr[i] |= TOK_ATTR_RSTRIP;
        int32_t id = find_text(t, "</s>");
        if (id >= 0) t->attr[id] |= TOK_ATTR_RSTRIP;
        static const char *const no_strip[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t i = 0; i < LLC_ARRAY_LEN(no_strip); i++) {
            id = find_text(t, no_strip[i]);
            if (id >= 0) t->attr[id] &= (uint16_t)~TOK_ATTR_RSTRIP;
        }
    } else if (strstr(name_lc, "modern-bert")) {
        int32_t id = find_text(t, "[MASK]");
        if (id >= 0) t->attr[id] |= TOK_ATTR_LSTRIP;
    }
}

/* The special-token partition table: CONTROL | USER_DEFINED | UNKNOWN tokens,
 * longest text first (ties: lower id first), plus a byte trie over their texts. */
static int cmp_special(const void *a, const void *b, void *ctx) {
    const tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = t->vocab.len[x], ly = t->vocab.len[y];
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int build_special_table(tokenizer *t) {
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->attr[i] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) n++;
    t->n_special = n;
    if (!n) return 0;
    t->special_ids = malloc((size_t)n * sizeof *t->special_ids);
    if (!t->special_ids) return LLC_ERR_NOMEM;
    n = 0;
    size_t bytes = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->attr[i] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) {
            t->special_ids[n++] = i;
            bytes += t->vocab.len[i];
        }
    qsort_r(t->special_ids, (size_t)n, sizeof *t->special_ids, cmp_special, t);

    if (bytes + 1 > (size_t)INT32_MAX) return LLC_ERR_RANGE;
    t->trie = malloc((bytes + 1) * sizeof *t->trie);
    if (!t->trie) return LLC_ERR_NOMEM;
    t->trie[0] = (tok_trie_node){-1, -1, -1, 0};
    t->n_trie = 1;
    for (int32_t k = 0; k < n; k++) {
        int32_t id = t->special_ids[k];
        const unsigned char *s = (const unsigned char *)tok_pool_str(&t->vocab, id);
        int32_t node = 0;
        for (uint32_t j = 0; j < t->vocab.len[id]; j++) {
            int32_t c = t->trie[node].child;
            while (c >= 0 && t->trie[c].byte != s[j]) c = t->trie[c].sibling;
            if (c < 0) {
                c = t->n_trie++;
                t->trie[c] = (tok_trie_node){-1, t->trie[node].child, -1, s[j]};
                t->trie[node].child = c;
            }
            node = c;
        }
        t->trie[node].order = k;
    }
    return 0;
}

/* Renders every token's piece (special = true) into one buffer. */
static int build_pieces(tokenizer *t) {
    size_t total = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) total += t->vocab.len[i];
    t->piece_buf = malloc(total + 1);
    t->piece_off = malloc((size_t)t->n_vocab * sizeof *t->piece_off);
    t->piece_len = malloc((size_t)t->n_vocab * sizeof *t->piece_len);
    if (!t->piece_buf || !t->piece_off || !t->piece_len) return LLC_ERR_NOMEM;
    size_t k = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const char *s = tok_pool_str(&t->vocab, i);
        uint32_t len = t->vocab.len[i];
        uint16_t a = t->attr[i];
        char *o = t->piece_buf + k;
        size_t m = 0;
        if (a & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED)) {
            memcpy(o, s, len);
            m = len;
        } else if (a & TOK_ATTR_NORMAL) {
            if (t->kind == TOK_KIND_SPM || t->escape_ws) {
                for (uint32_t j = 0; j < len;) {
                    if (j + 3 <= len && !memcmp(s + j, "\xE2\x96\x81", 3)) {
                        o[m++] = ' ';
                        j += 3;
                    } else {
                        o[m++] = s[j++];
                    }
                }
            } else {
                /* undo bytes_to_unicode; characters outside the map stay as they are */
                const unsigned char *u = (const unsigned char *)s;
                for (uint32_t j = 0; j < len;) {
                    int l = tok_utf8_valid_len(u + j, len - j);
                    int b = l ? tok_bpe_cp_byte(tok_utf8_decode(u + j, l)) : -1;
                    if (b >= 0) {
                        o[m++] = (char)b;
                    } else {
                        if (!l) l = 1;
                        memcpy(o + m, s + j, (size_t)l);
                        m += (size_t)l;
                    }
                    j += (uint32_t)l;
                }
            }
        } else if (a & TOK_ATTR_BYTE) {
            unsigned v;
            char tail;
            if (len == 6 && sscanf(s, "<0x%2x%c", &v, &tail) == 2 && tail == '>' &&
                isxdigit((unsigned char)s[3]) && isxdigit((unsigned char)s[4])) {
                o[m++] = (char)v;
            } else {
                memcpy(o, s, len);
                m = len;
            }
        }
        t->piece_off[i] = k;
        t->piece_len[i] = (uint32_t)m;
        k += m;
    }
    return 0;
}

static void spm_bytes(tokenizer *t) {
    int32_t unk = t->special[TOK_SPECIAL_UNK];
    for (int c = 0; c < 256; c++) {
        char buf[8];
        snprintf(buf, sizeof buf, "<0x%02X>", c);
        int32_t id = find_text(t, buf);
        if (id < 0) {
            char one = (char)c;
            id = tok_pool_find(&t->vocab, &one, 1);
        }
        t->spm_byte_tok[c] = id >= 0 ? id : unk; /* llama.cpp would throw here */
    }
}

void tok_free(tokenizer *t) {
    if (!t) return;
    tok_pool_free(&t->vocab);
    free(t->scores);
    free(t->attr);
    free(t->eog);
    free(t->piece_buf);
    free(t->piece_off);
    free(t->piece_len);
    free(t->special_ids);
    free(t->trie);
    tok_bpe_free(t->bpe);
    free(t);
}

int tok_load(const gguf *g, tokenizer **out, llc_err *err) {
    if (!out) return llc_fail(err, LLC_ERR_RANGE, "tokenizer: no output pointer");
    *out = NULL;
    if (!g) return llc_fail(err, LLC_ERR_RANGE, "tokenizer: no gguf");
    int rc;
    gguf_str model;
    const gguf_value *mv = gguf_find(g, KEY("model"));
    if (!mv) return llc_fail(err, LLC_ERR_NOTFOUND, "tokenizer: no %s in the file", KEY("model"));
    if (mv->type != GGUF_TYPE_STRING)
        return llc_fail(err, LLC_ERR_TYPE, "tokenizer: %s is a %s, not a string", KEY("model"),
                        gguf_type_name(mv->type));
    model = mv->v.str;
    tok_kind kind;
    bool gemma4 = false; /* SPM-style BPE; the pre-tokenizer is always "gemma4" */
    if (gguf_str_eq(model, "llama")) {
        kind = TOK_KIND_SPM;
    } else if (gguf_str_eq(model, "gpt2")) {
        kind = TOK_KIND_BPE;
    } else if (gguf_str_eq(model, "gemma4")) {
        kind = TOK_KIND_BPE;
        gemma4 = true;
    } else {
        char name[48];
        safe_name(model, name, sizeof name);
        return llc_fail(err, LLC_ERR_UNSUPPORTED,
                        "tokenizer: model '%s' is not supported (only 'llama' SentencePiece, "
                        "'gpt2' byte-level BPE and 'gemma4' SentencePiece-style BPE)", name);
    }

    gguf_array toks;
    rc = gguf_get_arr(g, KEY("tokens"), GGUF_TYPE_STRING, &toks, err);
    if (rc) {
        llc_err_prefix(err, "tokenizer");
        return rc;
    }
    if (toks.n == 0) return llc_fail(err, LLC_ERR_FORMAT, "tokenizer: the vocabulary is empty");
    if (toks.n > TOK_MAX_VOCAB)
        return llc_fail(err, LLC_ERR_RANGE, "tokenizer: %llu tokens (limit %d)",
                        (unsigned long long)toks.n, TOK_MAX_VOCAB);
    uint32_t n = (uint32_t)toks.n;

    gguf_array scores_arr = {0}, types_arr = {0};
    bool has_scores, has_types;
    rc = read_num_array(g, KEY("scores"), true, n, &scores_arr, &has_scores, err);
    if (!rc) rc = read_num_array(g, KEY("token_type"), false, n, &types_arr, &has_types, err);
    if (rc) return rc;

    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return llc_fail(err, LLC_ERR_NOMEM, "tokenizer: out of memory");
    t->kind = kind;
    t->n_vocab = (int32_t)n;
    t->scores = malloc(n * sizeof *t->scores);
    t->attr = malloc(n * sizeof *t->attr);
    t->eog = calloc(n, 1);
    if (!t->scores || !t->attr || !t->eog) goto oom;

    size_t bytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (toks.strs[i].len > UINT32_MAX / 2) {
            rc = llc_fail(err, LLC_ERR_RANGE, "tokenizer: token %u is %llu bytes long", i,
                          (unsigned long long)toks.strs[i].len);
            goto fail;
        }
        bytes += toks.strs[i].len + 16;
    }
    if (tok_pool_reserve(&t->vocab, (int32_t)n, bytes)) goto oom;
    for (uint32_t i = 0; i < n; i++) {
        const char *s = toks.strs[i].ptr;
        size_t len = (size_t)toks.strs[i].len;
        char empty[32];
        if (!len) { /* llama.cpp renames empty tokens */
            len = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%u]", i);
            s = empty;
        }
        int32_t dup = tok_pool_find(&t->vocab, s, len);
        if (dup >= 0) {
            char name[48];
            safe_name((gguf_str){s, len}, name, sizeof name);
            rc = llc_fail(err, LLC_ERR_FORMAT, "tokenizer: duplicate token '%s' (ids %d and %u)",
                          name, dup, i);
            goto fail;
        }
        if (tok_pool_add(&t->vocab, s, len) < 0) goto oom;
        float sc = 0.0f;
        if (has_scores)
            sc = is_int_type(scores_arr.elem_type) ? (float)gguf_arr_int(&scores_arr, i)
                                                    : gguf_arr_f32(&scores_arr, i);
        t->scores[i] = isnan(sc) ? -INFINITY : sc;
        t->attr[i] = has_types ? attr_of_type(gguf_arr_int(&types_arr, i)) : TOK_ATTR_NORMAL;
    }

    /* flags and defaults by model */
    for (int k = 0; k < TOK_SPECIAL_COUNT; k++) t->special[k] = -1;
    char pre[64] = "";
    bool pre_present = false;
    tok_pre_flags pre_flags = {0};
    gguf_str pre_s = {0};
    {
        const gguf_value *pv = gguf_find(g, KEY("pre"));
        if (pv) {
            if (pv->type != GGUF_TYPE_STRING) {
                rc = llc_fail(err, LLC_ERR_TYPE, "tokenizer: %s is a %s, not a string", KEY("pre"),
                              gguf_type_name(pv->type));
                goto fail;
            }
            pre_s = pv->v.str;
            pre_present = true;
            safe_name(pre_s, pre, sizeof pre);
        }
        if (gemma4) { /* llama.cpp ignores the file's value */
            pre_s = (gguf_str){"gemma4", 6};
            pre_present = true;
            snprintf(pre, sizeof pre, "gemma4");
        }
    }
    safe_name(model, t->model_name, sizeof t->model_name);
    snprintf(t->pre_name, sizeof t->pre_name, "%s", pre);
    tok_pretok *pretok = NULL;
    if (kind == TOK_KIND_SPM) {
        t->special[TOK_SPECIAL_BOS] = 1;
        t->special[TOK_SPECIAL_EOS] = 2;
        t->special[TOK_SPECIAL_UNK] = 0;
        t->add_space_prefix = true;
        t->add_bos = true;
    } else {
        if (!gemma4) { /* llama.cpp's BPE defaults; gemma4 has none */
            t->special[TOK_SPECIAL_BOS] = 11;
            t->special[TOK_SPECIAL_EOS] = 11;
        }
        rc = tok_pretok_create(pre_present ? pre_s.ptr : NULL, pre_present ? (size_t)pre_s.len : 0,
                               &pretok, &pre_flags, err);
        if (rc) goto fail;
        t->add_bos = pre_flags.add_bos;
        t->escape_ws = pre_flags.escape_ws;
        t->pre_unknown = pre_flags.unknown;
        if (pre_flags.bos_none) t->special[TOK_SPECIAL_BOS] = -1;
    }
    for (int k = 0; k < TOK_SPECIAL_COUNT; k++)
        if (t->special[k] >= t->n_vocab) t->special[k] = -1;

    if (kind == TOK_KIND_BPE) {
        const gguf_value *mg = gguf_find(g, KEY("merges"));
        if (!mg) {
            tok_pretok_free(pretok);
            rc = llc_fail(err, LLC_ERR_NOTFOUND, "tokenizer: no %s in a BPE vocabulary",
                          KEY("merges"));
            goto fail;
        }
        if (mg->type != GGUF_TYPE_ARRAY || mg->v.arr.elem_type != GGUF_TYPE_STRING) {
            tok_pretok_free(pretok);
            rc = llc_fail(err, LLC_ERR_TYPE, "tokenizer: %s is not an array of strings",
                          KEY("merges"));
            goto fail;
        }
        rc = tok_bpe_create(t, &mg->v.arr, pretok, &pre_flags, &t->bpe, err);
        if (rc) goto fail;
    }

    bool asp = t->add_space_prefix;
    if ((rc = read_bool(g, KEY("add_space_prefix"), &asp, err))) goto fail;
    if (kind == TOK_KIND_SPM) t->add_space_prefix = asp; /* BPE never prefixes a space */

    static const struct {
        const char *key;
        tok_special_kind kind;
    } id_keys[] = {
        {KEY("bos_token_id"), TOK_SPECIAL_BOS},       {KEY("eos_token_id"), TOK_SPECIAL_EOS},
        {KEY("eot_token_id"), TOK_SPECIAL_EOT},       {KEY("eom_token_id"), TOK_SPECIAL_EOM},
        {KEY("unknown_token_id"), TOK_SPECIAL_UNK},   {KEY("seperator_token_id"), TOK_SPECIAL_SEP},
        {KEY("separator_token_id"), TOK_SPECIAL_SEP}, {KEY("padding_token_id"), TOK_SPECIAL_PAD},
        {KEY("mask_token_id"), TOK_SPECIAL_MASK},     {KEY("fim_pre_token_id"), TOK_SPECIAL_FIM_PRE},
        {KEY("fim_suf_token_id"), TOK_SPECIAL_FIM_SUF}, {KEY("fim_mid_token_id"), TOK_SPECIAL_FIM_MID},
        {KEY("fim_pad_token_id"), TOK_SPECIAL_FIM_PAD}, {KEY("fim_rep_token_id"), TOK_SPECIAL_FIM_REP},
        {KEY("fim_sep_token_id"), TOK_SPECIAL_FIM_SEP}, {KEY("prefix_token_id"), TOK_SPECIAL_FIM_PRE},
        {KEY("suffix_token_id"), TOK_SPECIAL_FIM_SUF}, {KEY("middle_token_id"), TOK_SPECIAL_FIM_MID},
    };
    for (size_t i = 0; i < LLC_ARRAY_LEN(id_keys); i++)
        if ((rc = read_id(g, id_keys[i].key, t->n_vocab, &t->special[id_keys[i].kind], err)))
            goto fail;
    if ((rc = read_bool(g, KEY("add_bos_token"), &t->add_bos, err))) goto fail;
    if ((rc = read_bool(g, KEY("add_eos_token"), &t->add_eos, err))) goto fail;
    if (pre_flags.force_bos) t->add_bos = true; /* llama.cpp's gemma4 workaround */

    char name_lc[96] = "";
    {
        const gguf_value *nv = gguf_find(g, "general.name");
        if (nv && nv->type == GGUF_TYPE_STRING) {
            safe_name(nv->v.str, name_lc, sizeof name_lc);
            for (char *c = name_lc; *c; c++) *c = (char)tolower((unsigned char)*c);
        }
    }
    fix_specials(t, name_lc, pre);
    if (kind == TOK_KIND_SPM) spm_bytes(t);
    if ((rc = build_special_table(t)) || (rc = build_pieces(t))) {
        rc = llc_fail(err, rc, "tokenizer: out of memory");
        goto fail;
    }

    /* the newline token */
    if (kind == TOK_KIND_SPM) {
        int32_t nl = find_text(t, "<0x0A>");
        if (nl < 0) nl = find_text(t, "\n");
        t->special[TOK_SPECIAL_NL] = nl >= 0 ? nl : t->special[TOK_SPECIAL_PAD];
    } else {
        int32_t id = -1;
        int cnt = tok_encode(t, "\n", 1, false, false, &id, 1);
        t->special[TOK_SPECIAL_NL] = cnt >= 1 ? id : t->special[TOK_SPECIAL_PAD];
    }
    *out = t;
    return 0;
oom:
    rc = llc_fail(err, LLC_ERR_NOMEM, "tokenizer: out of memory");
fail:
    tok_free(t);
    return rc;
}

/* ---- accessors ---- */

int tok_describe(const tokenizer *t, char *buf, size_t cap) {
    if (!t || !buf || !cap) return LLC_ERR_RANGE;
    int n;
    if (t->kind == TOK_KIND_SPM)
        n = snprintf(buf, cap, "'%s' SentencePiece, %d tokens", t->model_name, t->n_vocab);
    else if (t->pre_unknown)
        n = snprintf(buf, cap,
                     "'%s' BPE, %d tokens, pre-tokenizer '%s' is not known here: GPT-2's regex "
                     "stands in for it (ids may differ from the model's own)",
                     t->model_name, t->n_vocab, t->pre_name);
    else
        n = snprintf(buf, cap, "'%s' %s BPE, %d tokens, pre-tokenizer '%s'", t->model_name,
                     t->escape_ws ? "SentencePiece-style" : "byte-level", t->n_vocab,
                     tok_pretok_name(tok_bpe_pretok(t->bpe)));
    return n;
}

int tok_n_vocab(const tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t tok_bos(const tokenizer *t) { return t ? t->special[TOK_SPECIAL_BOS] : -1; }
int32_t tok_eos(const tokenizer *t) { return t ? t->special[TOK_SPECIAL_EOS] : -1; }
bool tok_add_bos(const tokenizer *t) { return t && t->add_bos; }
bool tok_add_eos(const tokenizer *t) { return t && t->add_eos; }

bool tok_is_eog(const tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_vocab && t->eog[id];
}

int32_t tok_special(const tokenizer *t, tok_special_kind kind) {
    if (!t || (int)kind < 0 || kind >= TOK_SPECIAL_COUNT) return -1;
    return t->special[kind];
}

int tok_attr(const tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n_vocab) return -1;
    return t->attr[id];
}

const char *tok_text(const tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n_vocab) return NULL;
    return tok_pool_str(&t->vocab, id);
}

int tok_find(const tokenizer *t, const char *text, size_t len) {
    if (!t || (!text && len)) return -1;
    return tok_pool_find(&t->vocab, text ? text : "", len);
}

/* ---- encoding ---- */

typedef struct frag {
    size_t off, len;
    int32_t id; /* >= 0: a special token; -1: raw text [off, off+len) */
} frag;

typedef struct frags {
    frag *v;
    size_t n, cap;
    bool oom;
} frags;

static void frag_push(frags *f, size_t off, size_t len, int32_t id) {
    if (id < 0 && !len) return;
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 16;
        frag *v = realloc(f->v, nc * sizeof *v);
        if (!v) {
            f->oom = true;
            return;
        }
        f->v = v;
        f->cap = nc;
    }
    f->v[f->n++] = (frag){off, len, id};
}

static bool ascii_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static bool eligible(const tokenizer *t, int32_t id, bool parse_special) {
    return parse_special || !(t->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN));
}

/* Splits text around the texts of special tokens, longest token first, each
 * token's occurrences left to right (llama.cpp's tokenizer_st_partition). */
static void partition(const tokenizer *t, const char *text, size_t len, bool parse_special,
                      frags *out) {
    frag_push(out, 0, len, -1);
    if (!t->n_special || !len) return;
    /* which eligible tokens occur at all (one trie walk per position) */
    uint8_t *present = calloc((size_t)t->n_special, 1);
    if (!present) {
        out->oom = true;
        return;
    }
    bool any = false;
    const unsigned char *u = (const unsigned char *)text;
    for (size_t p = 0; p < len; p++) {
        int32_t node = 0;
        for (size_t q = p; q < len; q++) {
            int32_t c = t->trie[node].child;
            while (c >= 0 && t->trie[c].byte != u[q]) c = t->trie[c].sibling;
            if (c < 0) break;
            node = c;
            int32_t k = t->trie[node].order;
            if (k >= 0 && !present[k] && eligible(t, t->special_ids[k], parse_special))
                present[k] = 1, any = true;
        }
    }
    frags next = {0};
    for (int32_t k = 0; any && k < t->n_special && !out->oom; k++) {
        if (!present[k]) continue;
        int32_t id = t->special_ids[k];
        const char *s = tok_pool_str(&t->vocab, id);
        size_t sl = t->vocab.len[id];
        uint16_t a = t->attr[id];
        next.n = 0;
        for (size_t i = 0; i < out->n; i++) {
            frag f = out->v[i];
            if (f.id >= 0) {
                frag_push(&next, f.off, f.len, f.id);
                continue;
            }
            size_t base = f.off, blen = f.len;
            while (blen) {
                const char *m = memmem(text + base, blen, s, sl);
                if (!m) {
                    frag_push(&next, base, blen, -1);
                    break;
                }
                size_t mo = (size_t)(m - text);
                size_t left = mo - base;
                if (a & TOK_ATTR_LSTRIP)
                    while (left && ascii_space(text[base + left - 1])) left--;
                frag_push(&next, base, left, -1);
                frag_push(&next, mo, sl, id);
                size_t roff = mo + sl, rlen = base + blen - roff;
                if (a & TOK_ATTR_RSTRIP)
                    while (rlen && ascii_space(text[roff])) roff++, rlen--;
                base = roff;
                blen = rlen;
            }
        }
        if (next.oom) out->oom = true;
        frags tmp = *out;
        *out = next;
        next = tmp;
    }
    free(next.v);
    free(present);
}

int tok_encode(const tokenizer *t, const char *text, size_t len, bool add_bos,
               bool parse_special, int32_t *out, int cap) {
    if (!t || (!text && len) || cap < 0 || (cap > 0 && !out)) return LLC_ERR_RANGE;
    if (len > TOK_MAX_TEXT) return LLC_ERR_RANGE;
    tok_ids ids = {0};
    if (add_bos && t->special[TOK_SPECIAL_BOS] >= 0) tok_ids_push(&ids, t->special[TOK_SPECIAL_BOS]);
    frags fr = {0};
    partition(t, text, len, parse_special, &fr);
    bool prev_special = true; /* SPM: prefix a space to text at the start or after a special */
    for (size_t i = 0; i < fr.n && !fr.oom && !ids.oom; i++) {
        const frag *f = &fr.v[i];
        if (f->id >= 0) {
            tok_ids_push(&ids, f->id);
            prev_special = true;
        } else if (t->kind == TOK_KIND_SPM) {
            tok_spm_encode(t, text + f->off, f->len, t->add_space_prefix && prev_special, &ids);
            prev_special = false;
        } else {
            tok_bpe_encode(t, text + f->off, f->len, &ids);
        }
    }
    int rc;
    if (fr.oom || ids.oom) {
        rc = LLC_ERR_NOMEM;
    } else if (ids.n > INT_MAX) {
        rc = LLC_ERR_RANGE;
    } else {
        size_t m = ids.n < (size_t)cap ? ids.n : (size_t)cap;
        if (m) memcpy(out, ids.v, m * sizeof *out);
        rc = (int)ids.n;
    }
    free(fr.v);
    free(ids.v);
    return rc;
}
