/* grammar_match.c — the grammar matcher: parse stacks advanced over code points,
 * token texts in a byte trie, and the set of tokens that may come next.
 *
 * A parse stack is a list of element positions: the top is a character class
 * to match next, the ones below are where to continue once the rule above
 * ends. Stacks are persistent lists in an arena of nodes (pos, parent),
 * hash-consed, so a stack is one node id, pushing and popping copy nothing and
 * duplicates are found by id. The state's set of stacks is every way the text
 * so far can be parsed; id -1 is the empty stack (the text is complete).
 *
 * The allowed-token walk goes down the vocabulary trie byte by byte, decoding
 * UTF-8 as it goes; a completed character advances the set of stacks (nodes
 * made on the way are dropped again when the walk returns), an empty set ends
 * the subtree, an unfinished character is checked against the classes on top
 * of the stacks. Sets met on the way are named and their transitions
 * remembered, so a trie node the grammar lets through mostly costs one hash
 * lookup. */
#include <stdlib.h>
#include <string.h>

#include "engine/grammar/grammar_internal.h"
#include "engine/tokenizer/tokenizer.h"

/* ---- vocabulary trie ---- */

typedef struct tnode {
    int32_t child, sibling; /* first child, next sibling (-1: none) */
    int32_t tok;            /* first token whose text ends here (-1: none) */
    uint8_t byte;           /* the byte of the edge into this node */
} tnode;

struct grammar_vocab {
    int n_vocab;
    uint8_t *kind;    /* [n_vocab] grammar_token_kind */
    char *bytes;      /* every text, one after the other */
    int64_t *off;     /* [n_vocab + 1] */
    int32_t *tok_next; /* [n_vocab] next token ending at the same trie node */
    tnode *trie;
    int n_trie, cap_trie;
};

static int trie_child(grammar_vocab *v, int node, uint8_t b) {
    for (int c = v->trie[node].child; c >= 0; c = v->trie[c].sibling)
        if (v->trie[c].byte == b) return c;
    if (v->n_trie == v->cap_trie) {
        int cap = v->cap_trie * 2;
        tnode *t = realloc(v->trie, (size_t)cap * sizeof *t);
        if (!t) return -1;
        v->trie = t;
        v->cap_trie = cap;
    }
    int c = v->n_trie++;
    v->trie[c] = (tnode){.child = -1, .sibling = v->trie[node].child, .tok = -1, .byte = b};
    v->trie[node].child = c;
    return c;
}

int grammar_vocab_create(int n_vocab, const char *const *texts, const int *lens, const uint8_t *kinds,
                         grammar_vocab **out) {
    *out = NULL;
    if (n_vocab < 1) return LLC_ERR_RANGE;
    grammar_vocab *v = calloc(1, sizeof *v);
    if (!v) return LLC_ERR_NOMEM;
    v->n_vocab = n_vocab;
    int64_t total = 0;
    for (int i = 0; i < n_vocab; i++) total += kinds[i] == GRAMMAR_TOKEN_TEXT && lens[i] > 0 ? lens[i] : 0;
    v->kind = malloc((size_t)n_vocab);
    v->off = malloc((size_t)(n_vocab + 1) * sizeof *v->off);
    v->tok_next = malloc((size_t)n_vocab * sizeof *v->tok_next);
    v->bytes = malloc((size_t)(total > 0 ? total : 1));
    v->cap_trie = 1024;
    v->trie = malloc((size_t)v->cap_trie * sizeof *v->trie);
    if (!v->kind || !v->off || !v->tok_next || !v->bytes || !v->trie) {
        grammar_vocab_free(v);
        return LLC_ERR_NOMEM;
    }
    v->trie[0] = (tnode){.child = -1, .sibling = -1, .tok = -1};
    v->n_trie = 1;
    int64_t at = 0;
    for (int i = 0; i < n_vocab; i++) {
        uint8_t k = kinds[i];
        if (k == GRAMMAR_TOKEN_TEXT && lens[i] <= 0) k = GRAMMAR_TOKEN_NEVER; /* would never move on */
        v->kind[i] = k;
        v->off[i] = at;
        v->tok_next[i] = -1;
        if (k != GRAMMAR_TOKEN_TEXT) continue;
        memcpy(v->bytes + at, texts[i], (size_t)lens[i]);
        int node = 0;
        for (int j = 0; j < lens[i] && node >= 0; j++) node = trie_child(v, node, (uint8_t)texts[i][j]);
        if (node < 0) {
            grammar_vocab_free(v);
            return LLC_ERR_NOMEM;
        }
        v->tok_next[i] = v->trie[node].tok;
        v->trie[node].tok = i;
        at += lens[i];
    }
    v->off[n_vocab] = at;
    *out = v;
    return 0;
}

bool grammar_tokenizer_strips_space(const tokenizer *tok) {
    int32_t ids[8];
    int n = tok_encode(tok, "a", 1, false, false, ids, 8);
    if (n < 1 || n > 8) return false;
    char piece[8];
    int len = tok_piece(tok, ids[0], false, piece, sizeof piece);
    char *text = NULL;
    size_t tlen = 0;
    if (len < 1 || piece[0] != ' ' || tok_decode(tok, ids, n, false, &text, &tlen) < 0) return false;
    bool strips = tlen == 0 || text[0] != ' ';
    free(text);
    return strips;
}

int grammar_vocab_from_tokenizer(const tokenizer *tok, grammar_vocab **out) {
    int V = tok_n_vocab(tok);
    const char **texts = calloc((size_t)V, sizeof *texts);
    int *lens = calloc((size_t)V, sizeof *lens);
    uint8_t *kinds = calloc((size_t)V, 1);
    char *buf = NULL;
    size_t used = 0, cap = (size_t)V * 8;
    int rc = texts && lens && kinds && (buf = malloc(cap)) ? 0 : LLC_ERR_NOMEM;
    size_t *off = rc ? NULL : calloc((size_t)V, sizeof *off); /* pointers once buf stops moving */
    if (!rc && !off) rc = LLC_ERR_NOMEM;
    for (int i = 0; !rc && i < V; i++) {
        int attr = tok_attr(tok, i);
        if (tok_is_eog(tok, i)) kinds[i] = GRAMMAR_TOKEN_END;
        else if (attr < 0 || (attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN | TOK_ATTR_UNUSED))) kinds[i] = GRAMMAR_TOKEN_NEVER;
        else kinds[i] = GRAMMAR_TOKEN_TEXT;
        if (kinds[i] != GRAMMAR_TOKEN_TEXT) continue;
        int n = tok_piece(tok, i, false, NULL, 0);
        if (n <= 0) {
            kinds[i] = GRAMMAR_TOKEN_NEVER;
            continue;
        }
        if (used + (size_t)n > cap) {
            while (used + (size_t)n > cap) cap *= 2;
            char *b = realloc(buf, cap);
            if (!b) {
                rc = LLC_ERR_NOMEM;
                break;
            }
            buf = b;
        }
        tok_piece(tok, i, false, buf + used, n);
        off[i] = used;
        lens[i] = n;
        used += (size_t)n;
    }
    if (!rc) {
        for (int i = 0; i < V; i++) texts[i] = kinds[i] == GRAMMAR_TOKEN_TEXT ? buf + off[i] : "";
        rc = grammar_vocab_create(V, texts, lens, kinds, out);
    }
    free(texts);
    free(off);
    free(lens);
    free(kinds);
    free(buf);
    return rc;
}

void grammar_vocab_free(grammar_vocab *v) {
    if (!v) return;
    free(v->kind);
    free(v->bytes);
    free(v->off);
    free(v->tok_next);
    free(v->trie);
    free(v);
}

int grammar_vocab_size(const grammar_vocab *v) { return v->n_vocab; }

/* ---- UTF-8 ---- */

/* Set in a decoded character's bits while its first continuation byte is still
 * to come: that byte is the one that rules out overlong forms and surrogates. */
#define UTF8_LEAD 0x80000000u

/* Feeds byte b to the character being decoded (*cp, *need continuation bytes
 * still to come). Returns 1 when a character is complete (in *cp), 0 when more
 * bytes are needed, -1 when b cannot come here (invalid UTF-8, overlong forms
 * and UTF-16 surrogates included, as the detokenizer shows them as U+FFFD). */
static int utf8_feed(uint32_t *cp, int *need, uint8_t b) {
    if (*need == 0) {
        if (b < 0x80) return *cp = b, 1;
        if (b >= 0xC2 && b <= 0xDF) return *cp = (b & 0x1Fu) | UTF8_LEAD, *need = 1, 0;
        if (b >= 0xE0 && b <= 0xEF) return *cp = (b & 0x0Fu) | UTF8_LEAD, *need = 2, 0;
        if (b >= 0xF0 && b <= 0xF4) return *cp = (b & 0x07u) | UTF8_LEAD, *need = 3, 0;
        return -1;
    }
    if ((b & 0xC0) != 0x80) return -1;
    if (*cp & UTF8_LEAD) {
        uint32_t lead = *cp & ~UTF8_LEAD;
        if (*need == 2 && ((lead == 0 && b < 0xA0) || (lead == 0xD && b > 0x9F))) return -1;
        if (*need == 3 && ((lead == 0 && b < 0x90) || (lead == 4 && b > 0x8F))) return -1;
        *cp = lead;
    }
    *cp = (*cp << 6) | (b & 0x3Fu);
    return --*need == 0 ? 1 : 0;
}

/* The code points an unfinished character (cp, need) may still become. */
static void utf8_range(uint32_t cp, int need, uint32_t *lo, uint32_t *hi) {
    static const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};
    uint32_t c = cp & ~UTF8_LEAD;
    *lo = c << (6 * need);
    *hi = *lo | ((1u << (6 * need)) - 1);
    if ((cp & UTF8_LEAD) && *lo < least[need]) *lo = least[need];
    if (*hi > 0x10FFFF) *hi = 0x10FFFF;
}

/* ---- stacks ---- */

typedef struct gnode {
    uint32_t pos;   /* element position */
    int32_t parent; /* the stack below (-1: none) */
    int32_t next;   /* next node in the same hash bucket */
} gnode;

struct grammar_state {
    const grammar *g;
    gnode *nodes;
    int n_nodes, cap_nodes;
    int32_t *bucket;    /* hash heads; newest node first, so dropping nodes newest-first restores them */
    uint32_t n_bucket;  /* a power of two */
    uint32_t *seen;     /* [cap_nodes + 1]: set-membership marks of the current advance, by id + 1 */
    uint32_t gen;
    int32_t *sv;        /* sets of stacks: the state's own is sv[0..n_set), scratch sets follow */
    int n_sv, cap_sv, n_set;
    uint32_t cp;        /* unfinished character: bits so far, */
    int need;           /* and continuation bytes still to come */
    bool strip_space;   /* the first token's leading space is not text */
    bool oom;           /* out of memory, or an expansion over the limits below */
    bool over_limits;   /* that last: the grammar nests too deeply or branches too widely */
    struct pending { int32_t parent; uint32_t pos; } *todo; /* expand's work stack */
    int cap_todo;
    /* the (continuation, rule) pairs expanded for the set being built, each
       expanded once (else nested nullable repetitions take exponential time):
       open addressing, an entry live when its gen is the current one */
    struct expanded { uint64_t key; uint32_t gen; } *done;
    uint32_t done_mask; /* slots - 1; 0 while none */
    int n_done;         /* live entries */
    int work;           /* expansion steps since the set being built began */
    /* the last allowed set computed, for the set of stacks it was computed at
       (inside a string most steps come back to the same set) */
    const grammar_vocab *memo_v; /* NULL: none */
    int32_t *memo_set;  /* its stacks, sorted */
    int memo_n;
    uint32_t memo_cp;
    int memo_need;
    bool memo_strip;
    int memo_count;
    uint8_t *memo_mask; /* [memo_cap] */
    int memo_cap;
};

static uint32_t node_hash(int32_t parent, uint32_t pos) {
    uint64_t h = ((uint64_t)(uint32_t)parent << 32 | pos) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

static bool rehash(grammar_state *st, uint32_t n_bucket) {
    int32_t *b = malloc((size_t)n_bucket * sizeof *b);
    if (!b) return false;
    for (uint32_t i = 0; i < n_bucket; i++) b[i] = -1;
    for (int i = 0; i < st->n_nodes; i++) { /* oldest first: newest end up at the heads */
        uint32_t h = node_hash(st->nodes[i].parent, st->nodes[i].pos) & (n_bucket - 1);
        st->nodes[i].next = b[h];
        b[h] = i;
    }
    free(st->bucket);
    st->bucket = b;
    st->n_bucket = n_bucket;
    return true;
}

/* The node (pos on top of parent), made if new; -1 when out of memory. */
static int32_t intern(grammar_state *st, int32_t parent, uint32_t pos) {
    uint32_t h = node_hash(parent, pos) & (st->n_bucket - 1);
    for (int32_t i = st->bucket[h]; i >= 0; i = st->nodes[i].next)
        if (st->nodes[i].pos == pos && st->nodes[i].parent == parent) return i;
    if (st->n_nodes == st->cap_nodes) {
        int cap = st->cap_nodes * 2;
        gnode *n = realloc(st->nodes, (size_t)cap * sizeof *n);
        uint32_t *s = n ? realloc(st->seen, (size_t)(cap + 1) * sizeof *s) : NULL;
        if (n) st->nodes = n;
        if (!s) return st->oom = true, -1;
        memset(s + st->cap_nodes + 1, 0, (size_t)(cap - st->cap_nodes) * sizeof *s);
        st->seen = s;
        st->cap_nodes = cap;
    }
    int32_t id = st->n_nodes++;
    st->nodes[id] = (gnode){.pos = pos, .parent = parent, .next = st->bucket[h]};
    st->bucket[h] = id;
    if ((uint32_t)st->n_nodes > 2 * st->n_bucket && !rehash(st, st->n_bucket * 2)) st->oom = true;
    return id;
}

/* Drops the nodes made since n_nodes was `mark`. */
static void drop_nodes(grammar_state *st, int mark) {
    for (int i = st->n_nodes - 1; i >= mark; i--) {
        uint32_t h = node_hash(st->nodes[i].parent, st->nodes[i].pos) & (st->n_bucket - 1);
        st->bucket[h] = st->nodes[i].next;
    }
    st->n_nodes = mark;
}

static void set_add(grammar_state *st, int32_t id) {
    if (st->seen[id + 1] == st->gen) return;
    st->seen[id + 1] = st->gen;
    if (st->n_sv == st->cap_sv) {
        int cap = st->cap_sv * 2;
        int32_t *v = realloc(st->sv, (size_t)cap * sizeof *v);
        if (!v) return (void)(st->oom = true);
        st->sv = v;
        st->cap_sv = cap;
    }
    st->sv[st->n_sv++] = id;
}

/* Appends id to sv with no duplicate check. */
static void set_add_raw(grammar_state *st, int32_t id) {
    if (st->n_sv == st->cap_sv) {
        int cap = st->cap_sv * 2;
        int32_t *v = realloc(st->sv, (size_t)cap * sizeof *v);
        if (!v) return (void)(st->oom = true);
        st->sv = v;
        st->cap_sv = cap;
    }
    st->sv[st->n_sv++] = id;
}

static void new_set(grammar_state *st) {
    st->work = 0;
    st->n_done = 0;
    if (++st->gen == 0) { /* wrapped: forget every mark */
        memset(st->seen, 0, (size_t)(st->cap_nodes + 1) * sizeof *st->seen);
        if (st->done) memset(st->done, 0, ((size_t)st->done_mask + 1) * sizeof *st->done);
        st->gen = 1;
    }
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* Marks (cont, rule) expanded in this set; false when it already was (or on
 * out of memory, with st->oom set). */
static bool first_expansion(grammar_state *st, int32_t cont, int rule) {
    if ((uint64_t)(st->n_done + 1) * 2 > (uint64_t)st->done_mask + 1) { /* grow, keeping the live entries */
        uint32_t slots = st->done ? (st->done_mask + 1) * 2 : 1024;
        struct expanded *t = calloc(slots, sizeof *t);
        if (!t) return st->oom = true, false;
        for (uint32_t i = 0; st->done && i <= st->done_mask; i++)
            if (st->done[i].gen == st->gen) {
                uint32_t j = (uint32_t)mix64(st->done[i].key) & (slots - 1);
                while (t[j].gen == st->gen) j = (j + 1) & (slots - 1);
                t[j] = st->done[i];
            }
        free(st->done);
        st->done = t;
        st->done_mask = slots - 1;
    }
    uint64_t key = (uint64_t)(uint32_t)(cont + 1) << 32 | (uint32_t)rule;
    uint32_t i = (uint32_t)mix64(key) & st->done_mask;
    for (; st->done[i].gen == st->gen; i = (i + 1) & st->done_mask)
        if (st->done[i].key == key) return false;
    st->done[i] = (struct expanded){key, st->gen};
    st->n_done++;
    return true;
}

static bool push_todo(grammar_state *st, int *n, int32_t parent, uint32_t pos) {
    if (*n == st->cap_todo) {
        int cap = st->cap_todo ? st->cap_todo * 2 : 64;
        struct pending *t = realloc(st->todo, (size_t)cap * sizeof *t);
        if (!t) return st->oom = true, false;
        st->todo = t;
        st->cap_todo = cap;
    }
    st->todo[(*n)++] = (struct pending){parent, pos};
    return true;
}

/* Adds to the set being built every stack that continues at element pos over
 * `parent`: rule references are expanded until a character class is on top;
 * an ended alternative pops back to its parent's continuation. Depth first,
 * alternatives in order, on a work stack of its own: nesting costs no C stack,
 * only steps, which GRAMMAR_MAX_WORK bounds; a rule already expanded over the
 * same continuation in this set adds nothing and is skipped. */
static void expand(grammar_state *st, int32_t parent, uint32_t pos) {
    const grammar *g = st->g;
    int n = 0;
    if (!push_todo(st, &n, parent, pos)) return;
    while (n > 0 && !st->oom) {
        parent = st->todo[--n].parent, pos = st->todo[n].pos;
        for (;;) {
            const gelem *el = &g->elems[pos];
            if (gelem_ends_alt(el->type)) {
                if (parent < 0) {
                    set_add(st, -1);
                    break;
                }
                pos = st->nodes[parent].pos;
                parent = st->nodes[parent].parent;
                continue;
            }
            if (el->type == GE_RULE_REF) {
                if (++st->work > GRAMMAR_MAX_WORK) return (void)(st->oom = st->over_limits = true);
                int32_t cont = parent;
                if (!gelem_ends_alt(g->elems[pos + 1].type) && (cont = intern(st, parent, pos + 1)) < 0) return;
                int r = (int)el->value;
                if (!first_expansion(st, cont, r)) break; /* the same stacks again */
                for (int a = g->rule_alts[r + 1] - 1; a >= g->rule_alts[r]; a--) /* the first on top */
                    if (!push_todo(st, &n, cont, (uint32_t)g->alts[a])) return;
                break;
            }
            int32_t id = intern(st, parent, pos);
            if (id >= 0) set_add(st, id);
            break;
        }
    }
}

/* Whether code point c matches the class at el. */
static bool match_char(const gelem *el, uint32_t c) {
    if (el->type == GE_CHAR_ANY) return true;
    bool positive = el->type == GE_CHAR, found = false;
    do {
        if (el[1].type == GE_CHAR_RNG_UPPER) {
            found = found || (el->value <= c && c <= el[1].value);
            el += 2;
        } else {
            found = found || el->value == c;
            el += 1;
        }
    } while (el->type == GE_CHAR_ALT);
    return found == positive;
}

/* Whether some code point in [lo, hi] may match the class at el. */
static bool match_range(const gelem *el, uint32_t lo, uint32_t hi) {
    if (el->type == GE_CHAR_ANY) return true;
    bool positive = el->type == GE_CHAR;
    do {
        uint32_t a = el->value, b = el[1].type == GE_CHAR_RNG_UPPER ? el[1].value : a;
        if (positive && a <= hi && b >= lo) return true;
        if (!positive && a <= lo && b >= hi) return false; /* the whole range is excluded */
        el += el[1].type == GE_CHAR_RNG_UPPER ? 2 : 1;
    } while (el->type == GE_CHAR_ALT);
    return !positive;
}

/* The element after the class at pos. */
static uint32_t class_end(const grammar *g, uint32_t pos) {
    const gelem *el = &g->elems[pos];
    if (el->type == GE_CHAR_ANY) return pos + 1;
    do {
        pos += g->elems[pos + 1].type == GE_CHAR_RNG_UPPER ? 2 : 1;
    } while (g->elems[pos].type == GE_CHAR_ALT);
    return pos;
}

/* Appends the set reached from sv[s0..s1) over code point c; returns its start
 * (the set is sv[start..n_sv), empty when c cannot come). */
static int advance(grammar_state *st, int s0, int s1, uint32_t c) {
    int start = st->n_sv;
    new_set(st);
    for (int i = s0; i < s1; i++) {
        int32_t id = st->sv[i];
        if (id < 0) continue;
        gnode n = st->nodes[id];
        if (match_char(&st->g->elems[n.pos], c)) expand(st, n.parent, class_end(st->g, n.pos));
    }
    return start;
}

/* Whether an unfinished character (cp, need) may still match some stack of sv[s0..s1). */
static bool partial_ok(const grammar_state *st, int s0, int s1, uint32_t cp, int need) {
    uint32_t lo, hi;
    utf8_range(cp, need, &lo, &hi);
    for (int i = s0; i < s1; i++)
        if (st->sv[i] >= 0 && match_range(&st->g->elems[st->nodes[st->sv[i]].pos], lo, hi)) return true;
    return false;
}

int grammar_state_create(const grammar *g, bool strip_leading_space, grammar_state **out) {
    *out = NULL;
    grammar_state *st = calloc(1, sizeof *st);
    if (!st) return LLC_ERR_NOMEM;
    st->g = g;
    st->cap_nodes = 256;
    st->cap_sv = 256;
    st->nodes = malloc((size_t)st->cap_nodes * sizeof *st->nodes);
    st->seen = calloc((size_t)st->cap_nodes + 1, sizeof *st->seen);
    st->sv = malloc((size_t)st->cap_sv * sizeof *st->sv);
    if (!st->nodes || !st->seen || !st->sv || !rehash(st, 256)) {
        grammar_state_free(st);
        return LLC_ERR_NOMEM;
    }
    st->strip_space = strip_leading_space;
    new_set(st);
    for (int a = g->rule_alts[g->root]; a < g->rule_alts[g->root + 1]; a++) expand(st, -1, (uint32_t)g->alts[a]);
    st->n_set = st->n_sv;
    if (st->oom) {
        int rc = st->over_limits ? LLC_ERR_RANGE : LLC_ERR_NOMEM;
        grammar_state_free(st);
        return rc;
    }
    *out = st;
    return 0;
}

int grammar_state_clone(const grammar_state *src, grammar_state **out) {
    *out = NULL;
    grammar_state *st = calloc(1, sizeof *st);
    if (!st) return LLC_ERR_NOMEM;
    *st = *src;
    st->memo_v = NULL, st->memo_set = NULL, st->memo_mask = NULL, st->memo_cap = 0;
    st->todo = NULL, st->cap_todo = 0;
    st->done = NULL, st->done_mask = 0, st->n_done = 0;
    st->nodes = malloc((size_t)st->cap_nodes * sizeof *st->nodes);
    st->seen = malloc((size_t)(st->cap_nodes + 1) * sizeof *st->seen);
    st->sv = malloc((size_t)st->cap_sv * sizeof *st->sv);
    st->bucket = malloc((size_t)st->n_bucket * sizeof *st->bucket);
    if (!st->nodes || !st->seen || !st->sv || !st->bucket) {
        grammar_state_free(st);
        return LLC_ERR_NOMEM;
    }
    memcpy(st->nodes, src->nodes, (size_t)src->n_nodes * sizeof *st->nodes);
    memcpy(st->seen, src->seen, (size_t)(src->cap_nodes + 1) * sizeof *st->seen);
    memcpy(st->sv, src->sv, (size_t)src->n_sv * sizeof *st->sv);
    memcpy(st->bucket, src->bucket, (size_t)src->n_bucket * sizeof *st->bucket);
    *out = st;
    return 0;
}

void grammar_state_free(grammar_state *st) {
    if (!st) return;
    free(st->nodes);
    free(st->seen);
    free(st->sv);
    free(st->bucket);
    free(st->memo_set);
    free(st->memo_mask);
    free(st->todo);
    free(st->done);
    free(st);
}

bool grammar_state_complete(const grammar_state *st) {
    if (st->need) return false;
    for (int i = 0; i < st->n_set; i++)
        if (st->sv[i] < 0) return true;
    return false;
}

bool grammar_state_must_end(const grammar_state *st) {
    return grammar_state_complete(st) && st->n_set == 1;
}

/* Follows bytes from the state's set; on success the resulting set is
 * sv[*r0..*r1) and (*cp, *need) the unfinished character. Scratch nodes and sets
 * stay for the caller to keep or drop. */
static bool follow(grammar_state *st, const char *bytes, size_t len, int *r0, int *r1, uint32_t *cp, int *need) {
    int s0 = 0, s1 = st->n_set;
    uint32_t c = st->cp;
    int nd = st->need;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (uint8_t)bytes[i];
        if (i == 0 && st->strip_space && nd == 0 && b == ' ') continue;
        int r = utf8_feed(&c, &nd, b);
        if (r < 0) return false;
        if (r == 0) continue;
        s0 = advance(st, s0, s1, c);
        s1 = st->n_sv;
        if (s1 == s0 || st->oom) return false;
    }
    if (nd > 0 && !partial_ok(st, s0, s1, c, nd)) return false;
    *r0 = s0, *r1 = s1, *cp = c, *need = nd;
    return true;
}

bool grammar_state_allows_bytes(grammar_state *st, const char *bytes, size_t len) {
    int mark = st->n_nodes, sv_mark = st->n_sv, r0, r1, nd;
    uint32_t c;
    bool ok = len > 0 && follow(st, bytes, len, &r0, &r1, &c, &nd);
    drop_nodes(st, mark);
    st->n_sv = sv_mark;
    st->oom = false;
    return ok;
}

bool grammar_state_allows(grammar_state *st, const grammar_vocab *v, int32_t id) {
    if (id < 0 || id >= v->n_vocab) return false;
    if (v->kind[id] == GRAMMAR_TOKEN_END) return grammar_state_complete(st);
    if (v->kind[id] != GRAMMAR_TOKEN_TEXT) return false;
    return grammar_state_allows_bytes(st, v->bytes + v->off[id], (size_t)(v->off[id + 1] - v->off[id]));
}

/* Rebuilds the arena from the stacks of the state's set alone (the rest is
 * garbage from earlier steps). */
static int32_t copy_stack(grammar_state *dst, const grammar_state *src, int32_t id, int32_t *map) {
    /* up the stack to the first node already copied (or its bottom), then back
       down, each node interned over its copied parent; map[] doubles as the
       way back (the not-yet-copied nodes hold -2 - their child) */
    int32_t child = -1;
    while (id >= 0 && map[id] < 0) {
        map[id] = -2 - child;
        child = id;
        id = src->nodes[id].parent;
    }
    int32_t copied = id < 0 ? -1 : map[id];
    for (id = child; id >= 0;) {
        int32_t above = -2 - map[id];
        copied = map[id] = intern(dst, copied, src->nodes[id].pos);
        if (copied < 0) return -1;
        id = above;
    }
    return copied;
}

static void compact(grammar_state *st) {
    grammar_state *tmp;
    int32_t *map = malloc((size_t)st->n_nodes * sizeof *map);
    if (!map || grammar_state_create(st->g, false, &tmp)) return free(map);
    for (int i = 0; i < st->n_nodes; i++) map[i] = -1;
    tmp->n_sv = 0;
    drop_nodes(tmp, 0);
    new_set(tmp);
    for (int i = 0; i < st->n_set; i++) {
        int32_t id = copy_stack(tmp, st, st->sv[i], map);
        if (st->sv[i] >= 0 && id < 0) tmp->oom = true;
        else set_add(tmp, id);
    }
    free(map);
    if (tmp->oom) return grammar_state_free(tmp);
    tmp->n_set = tmp->n_sv;
    tmp->cp = st->cp, tmp->need = st->need, tmp->strip_space = st->strip_space;
    tmp->memo_v = NULL; /* node ids change: the remembered set means nothing now */
    tmp->memo_set = st->memo_set, tmp->memo_mask = st->memo_mask, tmp->memo_cap = st->memo_cap;
    st->memo_set = NULL, st->memo_mask = NULL, st->memo_cap = 0;
    grammar_state old = *st;
    *st = *tmp;
    *tmp = old;
    grammar_state_free(tmp);
}

int grammar_state_accept_bytes(grammar_state *st, const char *bytes, size_t len) {
    int mark = st->n_nodes, sv_mark = st->n_sv, r0, r1, nd;
    uint32_t c;
    if (!follow(st, bytes, len, &r0, &r1, &c, &nd)) {
        drop_nodes(st, mark);
        st->n_sv = sv_mark;
        bool oom = st->oom;
        st->oom = false;
        return oom ? LLC_ERR_NOMEM : LLC_ERR_RANGE;
    }
    memmove(st->sv, st->sv + r0, (size_t)(r1 - r0) * sizeof *st->sv);
    st->n_set = st->n_sv = r1 - r0;
    st->cp = nd ? c : 0, st->need = nd; /* no character open: cp means nothing */
    if (len > 0) st->strip_space = false;
    if (st->n_nodes > 4096 && st->n_nodes > 64 * st->n_set) compact(st);
    return 0;
}

int grammar_state_accept(grammar_state *st, const grammar_vocab *v, int32_t id) {
    if (!grammar_state_allows(st, v, id)) return LLC_ERR_RANGE;
    if (v->kind[id] == GRAMMAR_TOKEN_END) return 0;
    return grammar_state_accept_bytes(st, v->bytes + v->off[id], (size_t)(v->off[id + 1] - v->off[id]));
}

/* ---- the allowed set ----
 *
 * Many trie paths reach the same set of stacks (inside a string, nearly every
 * character leads back to the set it came from), so the walk names each set
 * it meets (sorted node ids, interned) and remembers the transitions
 * (set, code point) -> set in a hash table. Nodes made during the walk stay
 * until it ends, so the remembered sets stay valid. */

typedef struct wset {
    int s0, s1;     /* its stacks: sv[s0..s1), sorted */
    uint64_t hash;
} wset;

typedef struct walk_ctx {
    grammar_state *st;
    const grammar_vocab *v;
    uint8_t *allowed;
    int count;
    wset *sets;
    int n_sets, cap_sets;
    int32_t *set_bucket;     /* set hash -> first set id (chained through set_next) */
    int32_t *set_next;
    uint32_t n_set_bucket;
    uint64_t *tkey;          /* transitions: (set id << 32 | code point) + 1, 0 = empty */
    int32_t *tval;           /* the set reached, or -1 (no stack accepts it) */
    uint32_t n_trans, cap_trans; /* cap a power of two */
    bool oom;
} walk_ctx;

static void sort_ids(int32_t *a, int n) {
    for (int i = 1; i < n; i++) {
        int32_t x = a[i];
        int j = i - 1;
        for (; j >= 0 && a[j] > x; j--) a[j + 1] = a[j];
        a[j + 1] = x;
    }
}

/* The id of the set sv[s0..s1) (the last slice of sv): an equal set met before
 * (the slice is then given back), or a new one. -1 when out of memory. */
static int intern_set(walk_ctx *w, int s0, int s1) {
    grammar_state *st = w->st;
    sort_ids(st->sv + s0, s1 - s0);
    uint64_t h = 0x9E3779B97F4A7C15ull * (uint64_t)(s1 - s0 + 1);
    for (int i = s0; i < s1; i++) h = mix64(h ^ (uint32_t)st->sv[i]);
    uint32_t b = (uint32_t)h & (w->n_set_bucket - 1);
    for (int32_t id = w->set_bucket[b]; id >= 0; id = w->set_next[id]) {
        const wset *x = &w->sets[id];
        if (x->hash == h && x->s1 - x->s0 == s1 - s0 &&
            !memcmp(st->sv + x->s0, st->sv + s0, (size_t)(s1 - s0) * sizeof *st->sv)) {
            if (s1 == st->n_sv) st->n_sv = s0;
            return id;
        }
    }
    if (w->n_sets == w->cap_sets) {
        int cap = w->cap_sets * 2;
        wset *ns = realloc(w->sets, (size_t)cap * sizeof *ns);
        if (ns) w->sets = ns;
        int32_t *nx = ns ? realloc(w->set_next, (size_t)cap * sizeof *nx) : NULL;
        if (!nx) return w->oom = true, -1;
        w->set_next = nx;
        w->cap_sets = cap;
    }
    int id = w->n_sets++;
    w->sets[id] = (wset){.s0 = s0, .s1 = s1, .hash = h};
    w->set_next[id] = w->set_bucket[b];
    w->set_bucket[b] = id;
    if ((uint32_t)w->n_sets > 2 * w->n_set_bucket) { /* grow the buckets */
        uint32_t nb = w->n_set_bucket * 4;
        int32_t *bk = malloc((size_t)nb * sizeof *bk);
        if (bk) {
            for (uint32_t i = 0; i < nb; i++) bk[i] = -1;
            for (int i = 0; i < w->n_sets; i++) {
                uint32_t k = (uint32_t)w->sets[i].hash & (nb - 1);
                w->set_next[i] = bk[k];
                bk[k] = i;
            }
            free(w->set_bucket);
            w->set_bucket = bk;
            w->n_set_bucket = nb;
        }
    }
    return id;
}

/* The set reached from set `id` over code point c (-1: none), remembered. */
static int transition(walk_ctx *w, int id, uint32_t c) {
    uint64_t key = ((uint64_t)(uint32_t)id << 32 | c) + 1;
    uint32_t mask = w->cap_trans - 1, i = (uint32_t)mix64(key) & mask;
    for (; w->tkey[i]; i = (i + 1) & mask)
        if (w->tkey[i] == key) return w->tval[i];
    grammar_state *st = w->st;
    int ns = advance(st, w->sets[id].s0, w->sets[id].s1, c);
    int to = st->n_sv > ns && !st->oom ? intern_set(w, ns, st->n_sv) : -1;
    if (to < 0) st->n_sv = ns;
    if (2 * (w->n_trans + 1) > w->cap_trans) { /* grow, then insert */
        uint32_t cap = w->cap_trans * 2;
        uint64_t *k2 = calloc(cap, sizeof *k2);
        int32_t *v2 = malloc((size_t)cap * sizeof *v2);
        if (!k2 || !v2) {
            free(k2), free(v2);
            return to; /* not remembered */
        }
        for (uint32_t j = 0; j < w->cap_trans; j++) {
            if (!w->tkey[j]) continue;
            uint32_t p = (uint32_t)mix64(w->tkey[j]) & (cap - 1);
            while (k2[p]) p = (p + 1) & (cap - 1);
            k2[p] = w->tkey[j], v2[p] = w->tval[j];
        }
        free(w->tkey), free(w->tval);
        w->tkey = k2, w->tval = v2, w->cap_trans = cap;
        mask = cap - 1;
        for (i = (uint32_t)mix64(key) & mask; w->tkey[i]; i = (i + 1) & mask) {}
    }
    w->tkey[i] = key, w->tval[i] = to;
    w->n_trans++;
    return to;
}

static void walk(walk_ctx *w, int node, int set, uint32_t cp, int need, bool first) {
    grammar_state *st = w->st;
    const grammar_vocab *v = w->v;
    if (v->trie[node].tok >= 0 && node != 0) {
        bool ok = need == 0 || partial_ok(st, w->sets[set].s0, w->sets[set].s1, cp, need);
        for (int32_t t = v->trie[node].tok; ok && t >= 0; t = v->tok_next[t]) w->allowed[t] = 1, w->count++;
    }
    for (int32_t ch = v->trie[node].child; ch >= 0; ch = v->trie[ch].sibling) {
        uint8_t b = v->trie[ch].byte;
        if (first && st->strip_space && need == 0 && b == ' ') {
            walk(w, ch, set, cp, need, false);
            continue;
        }
        uint32_t c = cp;
        int nd = need;
        int r = utf8_feed(&c, &nd, b);
        if (r < 0) continue;
        if (r == 0) {
            if (partial_ok(st, w->sets[set].s0, w->sets[set].s1, c, nd)) walk(w, ch, set, c, nd, false);
            continue;
        }
        int to = transition(w, set, c);
        if (to >= 0) walk(w, ch, to, 0, 0, false);
    }
}

/* Whether the memo holds the allowed set of the state's set sv[s0..s1) (sorted). */
static bool memo_hit(const grammar_state *st, const grammar_vocab *v, int s0, int s1) {
    return st->memo_v == v && st->memo_n == s1 - s0 && st->memo_cp == st->cp && st->memo_need == st->need &&
           st->memo_strip == st->strip_space && !memcmp(st->memo_set, st->sv + s0, (size_t)(s1 - s0) * sizeof *st->sv);
}

static void memo_store(grammar_state *st, const grammar_vocab *v, int s0, int s1, const uint8_t *allowed, int count) {
    int32_t *set = realloc(st->memo_set, (size_t)(s1 - s0 + 1) * sizeof *set);
    if (set) st->memo_set = set;
    st->memo_v = NULL;
    if (st->memo_cap != v->n_vocab) {
        free(st->memo_mask);
        st->memo_mask = malloc((size_t)v->n_vocab);
        st->memo_cap = st->memo_mask ? v->n_vocab : 0;
    }
    if (!set || !st->memo_mask) return;
    memcpy(set, st->sv + s0, (size_t)(s1 - s0) * sizeof *set);
    memcpy(st->memo_mask, allowed, (size_t)v->n_vocab);
    st->memo_n = s1 - s0, st->memo_cp = st->cp, st->memo_need = st->need, st->memo_strip = st->strip_space;
    st->memo_count = count;
    st->memo_v = v;
}

int grammar_state_allowed(grammar_state *st, const grammar_vocab *v, uint8_t *allowed) {
    /* the state's own set, copied (sorted, so equal sets compare equal) */
    int sv_mark0 = st->n_sv;
    for (int i = 0; i < st->n_set; i++) set_add_raw(st, st->sv[i]);
    sort_ids(st->sv + sv_mark0, st->n_set);
    if (!st->oom && memo_hit(st, v, sv_mark0, st->n_sv)) {
        st->n_sv = sv_mark0;
        memcpy(allowed, st->memo_mask, (size_t)v->n_vocab);
        return st->memo_count;
    }
    st->n_sv = sv_mark0;
    memset(allowed, 0, (size_t)v->n_vocab);
    walk_ctx w = {.st = st, .v = v, .allowed = allowed, .cap_sets = 64, .n_set_bucket = 64, .cap_trans = 1024};
    w.sets = malloc((size_t)w.cap_sets * sizeof *w.sets);
    w.set_next = malloc((size_t)w.cap_sets * sizeof *w.set_next);
    w.set_bucket = malloc((size_t)w.n_set_bucket * sizeof *w.set_bucket);
    w.tkey = calloc(w.cap_trans, sizeof *w.tkey);
    w.tval = malloc((size_t)w.cap_trans * sizeof *w.tval);
    int mark = st->n_nodes, sv_mark = st->n_sv;
    if (w.sets && w.set_next && w.set_bucket && w.tkey && w.tval) {
        for (uint32_t i = 0; i < w.n_set_bucket; i++) w.set_bucket[i] = -1;
        /* the state's own set, copied so that sorting it changes nothing */
        for (int i = 0; i < st->n_set; i++) set_add_raw(st, st->sv[i]);
        int root = intern_set(&w, sv_mark, st->n_sv);
        if (root >= 0) walk(&w, 0, root, st->cp, st->need, true);
    } else {
        w.oom = true;
    }
    drop_nodes(st, mark);
    st->n_sv = sv_mark;
    free(w.sets), free(w.set_next), free(w.set_bucket), free(w.tkey), free(w.tval);
    if (grammar_state_complete(st))
        for (int i = 0; i < v->n_vocab; i++)
            if (v->kind[i] == GRAMMAR_TOKEN_END) allowed[i] = 1, w.count++;
    bool oom = st->oom || w.oom;
    st->oom = false;
    if (oom) return LLC_ERR_NOMEM;
    for (int i = 0; i < st->n_set; i++) set_add_raw(st, st->sv[i]);
    sort_ids(st->sv + sv_mark, st->n_set);
    if (!st->oom) memo_store(st, v, sv_mark, st->n_sv, allowed, w.count);
    st->n_sv = sv_mark;
    st->oom = false;
    return w.count;
}
