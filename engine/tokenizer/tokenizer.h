/* tokenizer.h — text <-> token ids from a GGUF's tokenizer.ggml.* metadata.
 *
 * Three vocabulary kinds are implemented, following llama.cpp's behaviour:
 *   "llama"  — SentencePiece (SPM): scored bigram merges over UTF-8 characters,
 *              spaces escaped as U+2581, a space prefixed to the text, <0xNN> byte
 *              fallback for characters the vocabulary lacks.
 *   "gpt2"   — byte-level BPE: a pre-tokenizer (PCRE2 regexes chosen by
 *              tokenizer.ggml.pre) splits the text into words, bytes are mapped to
 *              printable characters (GPT-2's bytes_to_unicode) and merged by rank.
 *   "gemma4" — SentencePiece-style BPE (Gemma 4; also the gpt2 pre-tokenizers
 *              "gemma4", "granite-embed-multi-311m" and "sarvam-moe"): spaces
 *              escaped as U+2581, lines split from runs of newlines, ranked merges
 *              over UTF-8 characters, <0xNN> byte fallback; BOS is always added.
 * Other models (bert, t5, rwkv, ...) are refused with LLC_ERR_UNSUPPORTED, as are
 * the few pre-tokenizers llama.cpp implements with custom code (kimi-k2, afmoe,
 * whitespace). A missing pre-tokenizer uses llama.cpp's "default" regexes; an
 * unknown name falls back to GPT-2's regex (llama.cpp refuses it), which
 * tok_describe() reports.
 *
 * A loaded tokenizer is immutable: every function taking a `const tokenizer *`
 * may be called from several threads at once. Token ids are int32_t; -1 means
 * "no such token". */
#ifndef LLC_TOKENIZER_H
#define LLC_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/common.h"
#include "engine/gguf/gguf.h"

typedef struct tokenizer tokenizer;

/* Loads from tokenizer.ggml.* metadata. Copies everything it needs, so the gguf
 * may be freed afterwards. Malformed metadata (missing or wrong-typed keys,
 * arrays shorter than the vocabulary, duplicate or too many tokens ...) gives a
 * negative code and a message; unknown tokenizer models give LLC_ERR_UNSUPPORTED
 * naming the model. Out-of-range special token ids are ignored (as llama.cpp). */
int tok_load(const gguf *g, tokenizer **out, llc_err *err);
void tok_free(tokenizer *t);

/* One line for people saying which tokenizer this is ("'gpt2' byte-level BPE,
 * 151936 tokens, pre-tokenizer 'qwen2'"), and, when the file names a
 * pre-tokenizer not known here, that GPT-2's regex stands in for it. Writes at
 * most cap bytes (NUL included); returns the full length or negative. */
int tok_describe(const tokenizer *t, char *buf, size_t cap);

int tok_n_vocab(const tokenizer *t);
int32_t tok_bos(const tokenizer *t); /* -1 if none */
int32_t tok_eos(const tokenizer *t); /* -1 if none */
/* tokenizer.ggml.add_bos_token, else the model's default (llama: true; gpt2:
 * false, except the llama3/tekken/chameleon pre-tokenizers: true); gemma4: always
 * true, whatever the file says (as llama.cpp). */
bool tok_add_bos(const tokenizer *t);
bool tok_add_eos(const tokenizer *t); /* tokenizer.ggml.add_eos_token, default false */
/* End of generation: eos, eot, eom, fim pad/rep/sep and the well-known texts
 * <|eot_id|> <|im_end|> <|end|> <end_of_turn> <|endoftext|> </s> ... */
bool tok_is_eog(const tokenizer *t, int32_t id);

typedef enum tok_special_kind {
    TOK_SPECIAL_BOS,
    TOK_SPECIAL_EOS,
    TOK_SPECIAL_EOT,
    TOK_SPECIAL_EOM,
    TOK_SPECIAL_UNK,
    TOK_SPECIAL_SEP,
    TOK_SPECIAL_PAD,
    TOK_SPECIAL_MASK,
    TOK_SPECIAL_FIM_PRE,
    TOK_SPECIAL_FIM_SUF,
    TOK_SPECIAL_FIM_MID,
    TOK_SPECIAL_FIM_PAD,
    TOK_SPECIAL_FIM_REP,
    TOK_SPECIAL_FIM_SEP,
    TOK_SPECIAL_NL, /* the token a lone "\n" encodes to */
    TOK_SPECIAL_COUNT
} tok_special_kind;

/* Ids from tokenizer.ggml.*_token_id; EOT/EOM/FIM fall back to well-known token
 * texts (<|eot_id|>, <|im_end|>, <|end|>, <|fim_prefix|>, <fim_prefix>, <PRE>,
 * <｜fim▁begin｜> ...). -1 if absent or kind is out of range. */
int32_t tok_special(const tokenizer *t, tok_special_kind kind);

/* Token attributes (bit set), as llama.cpp derives them from token_type
 * (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte) plus its
 * fix-ups (control-looking EOG/FIM texts are made CONTROL, phi-3's chat markers
 * get RSTRIP ...). */
enum {
    TOK_ATTR_UNDEFINED = 0,
    TOK_ATTR_UNKNOWN = 1 << 0,
    TOK_ATTR_UNUSED = 1 << 1,
    TOK_ATTR_NORMAL = 1 << 2,
    TOK_ATTR_CONTROL = 1 << 3,
    TOK_ATTR_USER_DEFINED = 1 << 4,
    TOK_ATTR_BYTE = 1 << 5,
    TOK_ATTR_LSTRIP = 1 << 7, /* whitespace left of it is dropped when parsed */
    TOK_ATTR_RSTRIP = 1 << 8, /* whitespace right of it is dropped when parsed */
};
/* The attribute bits of id, or -1 on a bad id. */
int tok_attr(const tokenizer *t, int32_t id);

/* Encodes len bytes of text (any bytes, invalid UTF-8 included). Writes up to cap
 * ids to out (out may be NULL when cap is 0) and returns the total count, which
 * may exceed cap: call again with a bigger buffer. Negative on error (text too
 * long for an int count, out of memory). add_bos prepends BOS (if the vocabulary
 * has one). Special tokens, as in llama.cpp: the texts of USER_DEFINED tokens are
 * always matched as those tokens; with parse_special the texts of CONTROL and
 * UNKNOWN tokens are too; otherwise those are plain text. */
int tok_encode(const tokenizer *t, const char *text, size_t len, bool add_bos,
               bool parse_special, int32_t *out, int cap);

/* The bytes a token stands for when printed: byte tokens <0xNN> give that byte,
 * SPM's U+2581 gives a space, BPE's byte-to-unicode mapping is undone. CONTROL and
 * UNKNOWN tokens give nothing unless `special`, then their text; USER_DEFINED
 * tokens give their text. Copies min(result, cap) bytes to buf (no NUL) and
 * returns the full byte count (which may exceed cap); negative on a bad id. */
int tok_piece(const tokenizer *t, int32_t id, bool special, char *buf, int cap);
/* The raw vocabulary string, NUL-terminated; NULL on a bad id. */
const char *tok_text(const tokenizer *t, int32_t id);
/* Exact vocabulary lookup; -1 if absent. */
int tok_find(const tokenizer *t, const char *text, size_t len);

/* Decodes ids to text: malloc'd, NUL-terminated, length in *len_out (may be
 * NULL). The pieces are concatenated as tok_piece gives them, except the
 * SentencePiece leading space: when the tokenizer prefixes a space on encoding
 * (SPM with add_space_prefix, the default), one leading space of the first token
 * after any leading BOS tokens is dropped, so decode(encode(x)) == x. No other
 * clean-up is done (llama.cpp's clean_spaces is not applied). Negative on a bad
 * id (*out is then NULL) or out of memory. */
int tok_decode(const tokenizer *t, const int32_t *ids, int n, bool special, char **out,
               size_t *len_out);

/* Incremental detokenizer for streaming. Emits only complete UTF-8: a partial
 * multi-byte sequence at the end is held back until the next token completes it;
 * bytes that can never form valid UTF-8 are emitted as U+FFFD (one per maximal
 * invalid subpart). Applies tok_decode's leading-space rule, so for valid UTF-8
 * the concatenated output equals tok_decode's. */
typedef struct tok_stream tok_stream;
int tok_stream_create(const tokenizer *t, bool special, tok_stream **out);
void tok_stream_free(tok_stream *s);
/* The stream continues a text that starts with ids[0..n) (a prompt): the
 * leading-space rule fires only for the first token of the whole text, so once
 * any of these is not a BOS token, the first pushed token keeps its space
 * (" was" after "Once upon a time, there"), as tok_decode(prompt + output)
 * would give. Call before the first push. */
void tok_stream_continue(tok_stream *s, const int32_t *ids, int n);
/* Appends `id` and writes the text it makes complete to out, NUL-terminated;
 * returns its byte length (0 is common: nothing complete yet), or negative on a
 * bad id (the stream is unchanged) or cap < 1. Text that does not fit in cap-1
 * bytes stays queued (cut at a character boundary) and comes out on the next
 * push or flush; tok_stream_pending() tells how much is queued. */
int tok_stream_push(tok_stream *s, int32_t id, char *out, int cap);
/* Writes whatever is held back (an unfinished sequence becomes U+FFFD); call
 * until it returns 0 if cap may be small. The stream may be used again after. */
int tok_stream_flush(tok_stream *s, char *out, int cap);
/* Bytes held inside the stream (complete text not yet written plus an unfinished
 * UTF-8 tail). */
int tok_stream_pending(const tok_stream *s);

#endif
