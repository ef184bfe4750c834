/* grammar.h — constrained decoding: GBNF grammars (llama.cpp's syntax) and a
 * matcher that says which tokens may come next.
 *
 * A grammar is parsed once (grammar_parse) into rules of elements, as llama.cpp
 * does: every alternative is a sequence of characters classes and references to
 * rules; repetitions (* + ? {m,n}) and groups become generated rules. It is
 * immutable and may be shared by any number of states.
 *
 * A grammar_state is where one generated text stands: the set of parse stacks
 * (persistent lists of rule positions, hash-consed so that equal stacks are one
 * node and duplicates vanish) plus an unfinished UTF-8 character carried over
 * from the last token. Matching works on Unicode code points; a token may end
 * (or start) in the middle of a character.
 *
 * A grammar_vocab holds the byte texts of a vocabulary in a trie, so that the
 * allowed set of a whole vocabulary is one walk of the trie that follows the
 * parse stacks and drops a subtree at the first byte no stack accepts.
 *
 * Syntax accepted (GBNF): rules `name ::= alternatives` (root is `root`), `|`,
 * sequences, groups `( )`, `*` `+` `?` `{m}` `{m,}` `{m,n}`, string literals
 * "..." and char classes [...] / [^...] with ranges a-z and escapes \n \r \t
 * \\ \" \' \[ \] \- \/ \xHH \uHHHH \UHHHHHHHH, `.` (any character), rule names
 * of letters, digits and '-', comments from '#'. A rule ends at a newline
 * unless inside a group or after `|` or `::=`. Undefined rules and left
 * recursion are errors. Expanding the stacks for one character is bounded
 * (nesting depth and steps): a grammar past that fails as out of memory
 * rather than holding the caller. */
#ifndef LLC_GRAMMAR_H
#define LLC_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/common.h"

typedef struct grammar grammar;
typedef struct grammar_state grammar_state;
typedef struct grammar_vocab grammar_vocab;

/* Parses GBNF text (len bytes). A bad grammar gives LLC_ERR_FORMAT and a
 * message "line L, column C: ..." (or naming the rule for undefined rules and
 * left recursion). Needs a rule named root. */
int grammar_parse(const char *text, size_t len, grammar **out, llc_err *err);
/* A parsed grammar is read-only, so several owners on any threads may share it:
 * grammar_ref adds one (and returns g), grammar_free lets one go (the last frees it). */
grammar *grammar_ref(grammar *g);
void grammar_free(grammar *g);
int grammar_n_rules(const grammar *g);

/* ---- vocabulary ---- */

typedef enum grammar_token_kind {
    GRAMMAR_TOKEN_TEXT,  /* a token with text: allowed when the grammar accepts it */
    GRAMMAR_TOKEN_END,   /* end of generation: allowed when the grammar may end */
    GRAMMAR_TOKEN_NEVER, /* control tokens, empty texts: never allowed */
} grammar_token_kind;

/* texts[i] (lens[i] bytes, any bytes) is what token i prints; kinds[i] its
 * kind. Copies what it needs. */
int grammar_vocab_create(int n_vocab, const char *const *texts, const int *lens,
                         const uint8_t *kinds, grammar_vocab **out);
/* The vocabulary of a tokenizer: each token's printed bytes (tok_piece);
 * end-of-generation tokens are END, control, unknown and unused ones NEVER. */
struct tokenizer;
int grammar_vocab_from_tokenizer(const struct tokenizer *tok, grammar_vocab **out);
/* Whether the tokenizer prefixes a space on encoding that decoding drops
 * (SentencePiece): then the first token's leading space is not output text. */
bool grammar_tokenizer_strips_space(const struct tokenizer *tok);
void grammar_vocab_free(grammar_vocab *v);
int grammar_vocab_size(const grammar_vocab *v);

/* ---- matching ---- */

/* A state at the start of the text. strip_leading_space: the first token's
 * leading space is not part of the text (SentencePiece's space prefix, dropped
 * when the output is a text of its own). */
int grammar_state_create(const grammar *g, bool strip_leading_space, grammar_state **out);
/* An independent copy (parallel samples). */
int grammar_state_clone(const grammar_state *st, grammar_state **out);
void grammar_state_free(grammar_state *st);

/* Whether the text so far is a complete sentence of the grammar (an end token
 * may come now). */
bool grammar_state_complete(const grammar_state *st);
/* Complete and nothing may follow: the text must end here. */
bool grammar_state_must_end(const grammar_state *st);

/* Whether `len` bytes may follow the text so far. */
bool grammar_state_allows_bytes(grammar_state *st, const char *bytes, size_t len);
/* Whether token id may come next. */
bool grammar_state_allows(grammar_state *st, const grammar_vocab *v, int32_t id);
/* allowed[0..n_vocab) = 1 for every token that may come next, else 0. Returns
 * how many are allowed, or LLC_ERR_NOMEM. */
int grammar_state_allowed(grammar_state *st, const grammar_vocab *v, uint8_t *allowed);
/* Advances over `len` bytes; LLC_ERR_RANGE (state unchanged) if the grammar
 * does not allow them. */
int grammar_state_accept_bytes(grammar_state *st, const char *bytes, size_t len);
/* Advances over token id (an end token needs a complete text and changes
 * nothing); LLC_ERR_RANGE (state unchanged) if it is not allowed. */
int grammar_state_accept(grammar_state *st, const grammar_vocab *v, int32_t id);

#endif
