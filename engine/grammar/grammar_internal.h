/* grammar_internal.h — the compiled form of a grammar, shared by the parser
 * (grammar.c) and the matcher (grammar_match.c). Not a public interface.
 *
 * All rules live in one element array. A rule is its alternatives one after the
 * other, each a sequence of elements ended by GE_ALT (more follow) or GE_END
 * (the rule's last). A character class is a GE_CHAR or GE_CHAR_NOT element with
 * the first character, an optional GE_CHAR_RNG_UPPER (the range's end), then
 * GE_CHAR_ALT elements (each with its optional GE_CHAR_RNG_UPPER) for the other
 * members. GE_CHAR_ANY matches any character. */
#ifndef LLC_GRAMMAR_INTERNAL_H
#define LLC_GRAMMAR_INTERNAL_H

#include <stdatomic.h>

#include "engine/grammar/grammar.h"
#include "kernels/sbuf.h"

enum {
    GE_END,            /* end of the rule's last alternative */
    GE_ALT,            /* end of an alternative, another follows */
    GE_RULE_REF,       /* value: rule id */
    GE_CHAR,           /* value: code point (first member of a class) */
    GE_CHAR_NOT,       /* value: code point (first member of a negated class) */
    GE_CHAR_RNG_UPPER, /* value: upper end of the range started by the previous element */
    GE_CHAR_ALT,       /* value: code point (another member of the class) */
    GE_CHAR_ANY,       /* any character */
};

/* The limit on expanding one character's stacks (grammar_match.c), so that a
 * hostile grammar (nested nullable repetitions) fails instead of holding the
 * engine thread. grammar_parse refuses a grammar whose start already needs more. */
#define GRAMMAR_MAX_WORK (1 << 18)   /* rules expanded (each once per continuation) for one character */

typedef struct gelem {
    uint32_t type;
    uint32_t value;
} gelem;

/* Whether an element of this type ends an alternative (GE_ALT or GE_END). */
static inline bool gelem_ends_alt(uint32_t type) { return type == GE_END || type == GE_ALT; }

struct grammar {
    gelem *elems;      /* every rule, one after the other */
    int n_elems;
    int *rule_start;   /* [n_rules]: index of the rule's first element */
    int n_rules;
    int *alts;         /* start index of every alternative, rule by rule */
    int *rule_alts;    /* [n_rules + 1]: rule r's alternatives are alts[rule_alts[r] .. rule_alts[r+1]) */
    int root;          /* the rule id of `root` */
    atomic_int refs;   /* owners (grammar_ref); freed when the last one lets go */
};

/* ---- str_index.c: strings to ints in constant time (rule names, rule bodies) ----
 * A zeroed str_index is empty. Keys are copied; a key may be added only once. */
typedef struct str_index {
    int32_t *slots;  /* open addressing, -1 empty, else an entry; at most half full */
    uint32_t mask;   /* slots - 1 */
    uint32_t *hash;  /* [cap] each entry's key hash */
    int *value;      /* [cap] */
    size_t *off;     /* [cap + 1] entry e's key is keys.p[off[e] .. off[e+1]) */
    sbuf keys;
    int n, cap;
} str_index;

/* The value of key, or -1 when absent. */
int str_index_find(const str_index *x, const char *key, size_t len);
/* Adds key -> value (the caller has checked that key is absent): 0 or LLC_ERR_NOMEM. */
int str_index_add(str_index *x, const char *key, size_t len, int value);
void str_index_free(str_index *x);

#endif
