/* test_grammar.c — the GBNF parser (good and bad grammars with their error
 * positions), the matcher (byte strings accepted and refused, UTF-8 split
 * across tokens, repetition bounds, completion) and the allowed-token walk
 * against a token-by-token check. */
#include "tests/test.h"

#include "engine/grammar/grammar.h"

static grammar *parse(const char *text) {
    grammar *g = NULL;
    llc_err err = {{0}};
    int rc = grammar_parse(text, strlen(text), &g, &err);
    CHECKF(rc == 0, "%s: %s", text, err.msg);
    return g;
}

/* The error message of a bad grammar ("" if it parsed). */
static const char *parse_error(const char *text) {
    static llc_err err;
    memset(&err, 0, sizeof err);
    grammar *g = NULL;
    int rc = grammar_parse(text, strlen(text), &g, &err);
    grammar_free(g);
    return rc ? err.msg : "";
}

/* Whether the whole string s is a complete sentence of g. */
static bool matches(const grammar *g, const char *s) {
    grammar_state *st;
    if (grammar_state_create(g, false, &st)) return false;
    bool ok = grammar_state_accept_bytes(st, s, strlen(s)) == 0 && grammar_state_complete(st);
    grammar_state_free(st);
    return ok;
}

/* Whether s is a prefix of some sentence of g. */
static bool prefix_ok(const grammar *g, const char *s) {
    grammar_state *st;
    if (grammar_state_create(g, false, &st)) return false;
    bool ok = grammar_state_accept_bytes(st, s, strlen(s)) == 0;
    grammar_state_free(st);
    return ok;
}

static void test_parse_good(void) {
    static const char *good[] = {
        "root ::= \"a\"",
        "root ::= \"a\" | \"b\" \n",
        "# comment\nroot ::= x y # trailing\nx ::= [a-z]+\ny ::= [^\\n\\x00-\\x1F]*\n",
        "root ::= (\"a\" | \"b\")* \"c\"?\n",
        "root ::=\n  \"{\" ws (\n    item\n    (\",\" ws item)*\n  )? \"}\"\nitem ::= [0-9]{1,3}\nws ::= [ \\t]*\n",
        "root ::= . . \"\\u00e9\\U0001F600\" [\\[\\]\\-]\n",
        "root ::= x{2} x{0,} x{1,2} x{3,}\nx ::= \"x\"\n",
        "root ::= \"é€😀\" [α-ω]\n",
        "root ::= ",
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) grammar_free(parse(good[i]));
}

static void test_parse_bad(void) {
    static const struct { const char *text, *msg; } bad[] = {
        {"root ::= \"abc", "line 1, column 10: unterminated string"},
        {"root ::= [a-z", "line 1, column 10: unterminated character class"},
        {"root ::= x\n", "undefined rule 'x'"},
        {"root ::= \"a\"\nfoo := \"b\"\n", "line 2, column 5: expected '::='"},
        {"root ::= (\"a\" | \"b\"\n", "expected ')'"},
        {"root ::= * \"a\"", "line 1, column 10: '*' has nothing before it"},
        {"root ::= \"a\"{3,1}", "maximum is below the minimum"},
        {"root ::= \"\\q\"", "unknown escape"},
        {"root ::= [z-a]", "range end"},
        {"root ::= []", "empty character class"},
        {"start ::= \"a\"", "no rule named 'root'"},
        {"root ::= root \"a\" | \"b\"", "'root' is left-recursive"},
        {"root ::= x \"a\"\nx ::= y? root\ny ::= \"y\"", "left-recursive"},
        {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
        {"root ::= \"a\"{99999}", "repetition count over"},
        {"root ::= \"a\" )", "unexpected ')'"},
        {"root ::= \"\\x4\"", "needs 2 hex digits"},
        {"root ::= [\x95-c]", "line 1, column 11: invalid UTF-8"},
        {"root ::= \"a\xC3\"", "invalid UTF-8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *msg = parse_error(bad[i].text);
        CHECKF(strstr(msg, bad[i].msg) != NULL, "%s: got '%s', want '%s'", bad[i].text, msg, bad[i].msg);
    }
}

static void test_match_basic(void) {
    grammar *g = parse("root ::= \"ab\" (\"c\" | [x-z0-9])* \"!\"\n");
    CHECK(matches(g, "ab!"));
    CHECK(matches(g, "abc!"));
    CHECK(matches(g, "abcy9c!"));
    CHECK(!matches(g, "ab"));      /* a prefix, not complete */
    CHECK(prefix_ok(g, "ab"));
    CHECK(prefix_ok(g, "abcc"));
    CHECK(!prefix_ok(g, "abw"));
    CHECK(!prefix_ok(g, "b"));
    CHECK(!matches(g, "ab!!"));
    grammar_free(g);
    g = parse("root ::= [^\"\\\\] . \"q\"\n");
    CHECK(matches(g, "a\nq"));
    CHECK(!matches(g, "\"aq"));
    CHECK(!matches(g, "\\aq"));
    grammar_free(g);
}

static void test_match_repetition_bounds(void) {
    grammar *g = parse("root ::= \"<\" [0-9]{2,4} \">\" x{0,2} y{3,}\nx ::= \"x\"\ny ::= \"y\"\n");
    CHECK(!matches(g, "<1>yyy"));
    CHECK(matches(g, "<12>yyy"));
    CHECK(matches(g, "<1234>yyy"));
    CHECK(!prefix_ok(g, "<12345"));
    CHECK(matches(g, "<12>xxyyyyyyy"));
    CHECK(!prefix_ok(g, "<12>xxx"));
    CHECK(!matches(g, "<12>yy"));
    grammar_free(g);
    /* repetitions of nothing (the fuzzer's UBSan finding: a copy from NULL) */
    static const char *const empties[] = {"root ::= \"\"?", "root ::= \"\"*", "root ::= \"\"{0,3} \"x\""};
    for (size_t i = 0; i < sizeof empties / sizeof *empties; i++) {
        g = parse(empties[i]);
        CHECKF(g && matches(g, i < 2 ? "" : "x") && !prefix_ok(g, "y"), "%s", empties[i]);
        grammar_free(g);
    }
    g = parse("root ::= \"a\"+ \"b\"? \"c\"*\n");
    CHECK(!matches(g, ""));
    CHECK(matches(g, "a"));
    CHECK(matches(g, "aaabccc"));
    CHECK(!prefix_ok(g, "abb"));
    CHECK(!prefix_ok(g, "acb"));
    grammar_free(g);
}

static void test_match_utf8(void) {
    grammar *g = parse("root ::= \"é\" [α-ω]+ [^a-z]\n");
    CHECK(matches(g, "éαβ€"));
    CHECK(!matches(g, "éαβa"));
    CHECK(!prefix_ok(g, "e"));
    /* a character split over tokens: the partial bytes are checked and carried */
    grammar_state *st;
    CHECK(grammar_state_create(g, false, &st) == 0);
    CHECK(grammar_state_accept_bytes(st, "\xC3", 1) == 0);   /* first byte of é */
    CHECK(!grammar_state_complete(st));
    CHECK(!grammar_state_allows_bytes(st, "a", 1));          /* not a continuation byte */
    CHECK(grammar_state_accept_bytes(st, "\xA9", 1) == 0);   /* é */
    CHECK(!grammar_state_allows_bytes(st, "\xD0", 1));       /* U+0400..043F cannot be [α-ω] */
    CHECK(grammar_state_accept_bytes(st, "\xCE", 1) == 0);   /* α begins */
    CHECK(!grammar_state_allows_bytes(st, "\xC3\xA9", 2));   /* not a continuation */
    CHECK(grammar_state_accept_bytes(st, "\xB1", 1) == 0);   /* α */
    CHECK(grammar_state_allows_bytes(st, "\xD0", 1));        /* now [^a-z] may follow */
    CHECK(!grammar_state_allows_bytes(st, "b", 1));
    CHECK(grammar_state_accept_bytes(st, "\xE2\x82\xAC", 3) == 0);
    CHECK(grammar_state_complete(st));
    CHECK(grammar_state_must_end(st));
    CHECK(!grammar_state_allows_bytes(st, "\xFF", 1));
    grammar_state_free(st);
    grammar_free(g);
    /* overlong forms and surrogates are not characters (the detokenizer shows U+FFFD) */
    g = parse("root ::= [^x]+\n");
    CHECK(!prefix_ok(g, "\xC0\xBB"));
    CHECK(!prefix_ok(g, "\xE0\x81"));
    CHECK(!prefix_ok(g, "\xF0\x80"));
    CHECK(!prefix_ok(g, "\xED\xA0"));
    CHECK(!prefix_ok(g, "\xF4\x90"));
    CHECK(matches(g, "\xF0\x9F\x98\x80\xED\x9F\xBF"));
    grammar_free(g);
    g = parse("root ::= \"{\"\n");
    CHECK(!prefix_ok(g, "\xF0")); /* cannot become '{' */
    CHECK(!prefix_ok(g, "\xC1"));
    grammar_free(g);
}

static void test_leading_space_strip(void) {
    grammar *g = parse("root ::= \"{\" \" \"? \"}\"\n");
    grammar_state *st;
    CHECK(grammar_state_create(g, true, &st) == 0);
    CHECK(grammar_state_allows_bytes(st, " {", 2));    /* the space is not text */
    CHECK(grammar_state_accept_bytes(st, " {", 2) == 0);
    CHECK(grammar_state_allows_bytes(st, " }", 2));    /* now it is */
    CHECK(!grammar_state_allows_bytes(st, "  }", 3));
    grammar_state_free(st);
    grammar_free(g);
}

/* A vocabulary of short strings: every token's allowed flag from the trie walk
 * must equal the token-by-token check, at every step of a sentence. */
static void test_allowed_matches_single_checks(void) {
    static const char *texts[] = {"{", "}", "\"", "\"a", "a", "ab", "b\"", ":", ",", " ", " \"",
                                  "1", "12", "-", "true", "tr", "ue", "\xC3", "\xA9", "é", "\"é\"",
                                  "", "<eos>", "<ctl>", "}\n", "null"};
    enum { N = sizeof texts / sizeof *texts };
    int lens[N];
    uint8_t kinds[N];
    for (int i = 0; i < N; i++) {
        lens[i] = (int)strlen(texts[i]);
        kinds[i] = GRAMMAR_TOKEN_TEXT;
    }
    kinds[22] = GRAMMAR_TOKEN_END;
    kinds[23] = GRAMMAR_TOKEN_NEVER;
    grammar_vocab *v;
    CHECK(grammar_vocab_create(N, texts, lens, kinds, &v) == 0);
    grammar *g = parse("root ::= \"{\" (kv (\",\" \" \"? kv)*)? \"}\"\n"
                       "kv ::= str \":\" \" \"? val\n"
                       "str ::= \"\\\"\" [^\"]{0,3} \"\\\"\"\n"
                       "val ::= str | \"-\"? [0-9]+ | \"true\" | \"null\"\n");
    grammar_state *st;
    CHECK(grammar_state_create(g, false, &st) == 0);
    const char *sentence[] = {"{", "\"a", "b\"", ":", " \"", "\xC3", "\xA9", "\"", ",", "\"é\"", ":",
                              "tr", "ue", "}"};
    uint8_t allowed[N];
    for (size_t k = 0; k <= sizeof sentence / sizeof *sentence; k++) {
        int n = grammar_state_allowed(st, v, allowed);
        int count = 0;
        for (int i = 0; i < N; i++) {
            bool one = grammar_state_allows(st, v, i);
            CHECKF(one == (allowed[i] != 0), "step %zu token %d '%s': walk %d, check %d", k, i, texts[i],
                   allowed[i], one);
            count += one;
        }
        CHECK(n == count);
        CHECK(!allowed[21] && !allowed[23]); /* empty and control tokens never */
        CHECK(allowed[22] == (k == sizeof sentence / sizeof *sentence)); /* end only when complete */
        if (k == sizeof sentence / sizeof *sentence) break;
        int id = -1;
        for (int i = 0; i < N; i++)
            if (!strcmp(texts[i], sentence[k])) id = i;
        CHECKF(grammar_state_accept(st, v, id) == 0, "step %zu '%s'", k, sentence[k]);
    }
    CHECK(grammar_state_must_end(st));
    /* clones go their own ways */
    grammar_state *a, *b;
    CHECK(grammar_state_create(g, false, &a) == 0);
    CHECK(grammar_state_accept(a, v, 0) == 0);
    CHECK(grammar_state_clone(a, &b) == 0);
    CHECK(grammar_state_accept(a, v, 1) == 0);
    CHECK(grammar_state_complete(a) && !grammar_state_complete(b));
    CHECK(grammar_state_accept(b, v, 2) == 0);
    CHECK(grammar_state_accept(b, v, 3) != 0); /* '"a' cannot follow '{"': '"' then ':' */
    CHECK(grammar_state_accept(b, v, 1) == 0); /* '{"}' goes on as a string */
    grammar_state_free(a);
    grammar_state_free(b);
    grammar_state_free(st);
    grammar_free(g);
    grammar_vocab_free(v);
}

/* Long runs garbage-collect the node arena without losing the parse. */
static void test_long_run(void) {
    grammar *g = parse("root ::= (\"[\" root \"]\" | \"x\")*\n");
    grammar_state *st;
    CHECK(grammar_state_create(g, false, &st) == 0);
    for (int i = 0; i < 3000; i++) CHECK(grammar_state_accept_bytes(st, "[x", 2) == 0);
    for (int i = 0; i < 3000; i++) CHECK(grammar_state_accept_bytes(st, "x]", 2) == 0);
    CHECK(grammar_state_complete(st));
    CHECK(grammar_state_accept_bytes(st, "]", 1) != 0);
    grammar_state_free(st);
    grammar_free(g);
}

/* Nested nullable repetitions: each rule is expanded once per continuation, so
 * three levels of {0,20} (once exponential) start at once; a grammar whose first
 * character would still need more expansion than the matcher allows is refused
 * when it is parsed, saying why. */
static void test_hostile_grammar_bounded(void) {
    grammar *g = parse("root ::= ((((\"a\"?){0,20}){0,20}){0,20}) \"b\"\n");
    CHECK(g && matches(g, "aab") && matches(g, "b") && !matches(g, "ba"));
    grammar_free(g);
    CHECK(strstr(parse_error("root ::= ((\"a\"?){0,10000}){0,10000} \"b\"\n"), "too complex"));
}

/* Text of `(((...inner...)))` nested depth deep, then "b". */
static char *nested_groups(int depth, const char *inner) {
    char *s = malloc((size_t)depth * 2 + strlen(inner) + 32), *p = s;
    p += sprintf(p, "root ::= ");
    for (int i = 0; i < depth; i++) *p++ = '(';
    p += sprintf(p, "%s", inner);
    for (int i = 0; i < depth; i++) *p++ = ')';
    sprintf(p, " \"b\"\n");
    return s;
}

/* Deep nesting compiles and matches (the generated rules' names once collided
 * when cut, which made compiling cubic); past the limit, a clear error. */
static void test_deep_nesting(void) {
    char *text = nested_groups(2000, "\"a\"?");
    grammar *g = parse(text);
    CHECK(g && matches(g, "ab") && matches(g, "b") && !matches(g, "aab"));
    grammar_free(g);
    free(text);
    text = nested_groups(20000, "\"a\"");
    CHECK(strstr(parse_error(text), "nested more than 2048 deep"));
    free(text);
}

/* A chain of 200000 rules, each naming the next: the checks (nullable, left
 * recursion) and the matcher use no recursion, so nothing overflows the stack;
 * closing the chain into a cycle is found as left recursion. */
static void test_long_rule_chain(void) {
    enum { N = 200000 };
    char *text = malloc((size_t)N * 32 + 64), *p = text;
    p += sprintf(p, "root ::= r0 \"b\"\n");
    for (int i = 0; i < N - 1; i++) p += sprintf(p, "r%d ::= r%d\n", i, i + 1);
    char *last = p;
    sprintf(p, "r%d ::= \"a\"?\n", N - 1);
    grammar *g = parse(text);
    CHECK(g && grammar_n_rules(g) == N + 2 && matches(g, "ab") && matches(g, "b") && !matches(g, "ba"));
    grammar_free(g);
    sprintf(last, "r%d ::= \"a\" | r0\n", N - 1);
    CHECK(strstr(parse_error(text), "is left-recursive"));
    free(text);
}

/* Generated rules cannot take the name of a rule of the grammar's own. */
static void test_generated_names_distinct(void) {
    grammar *g = parse("root ::= (\"a\") root-1 (\"c\")*\nroot-1 ::= \"b\"\n");
    CHECK(g && matches(g, "ab") && matches(g, "abcc") && !matches(g, "aa"));
    grammar_free(g);
}

/* A server parses a grammar once and the engine takes a reference: the grammar
 * lives until its last owner lets go (a use after free here is ASan's to see). */
static void test_shared_owners(void) {
    grammar *g = parse("root ::= \"yes\" | \"no\"\n");
    CHECK(grammar_ref(g) == g);
    CHECK(grammar_ref(NULL) == NULL);
    grammar_free(g); /* the first owner lets go */
    CHECK(matches(g, "yes") && matches(g, "no") && !matches(g, "maybe"));
    grammar_free(g); /* the last one */
}

int main(void) {
    RUN(test_parse_good);
    RUN(test_shared_owners);
    RUN(test_parse_bad);
    RUN(test_match_basic);
    RUN(test_match_repetition_bounds);
    RUN(test_match_utf8);
    RUN(test_leading_space_strip);
    RUN(test_allowed_matches_single_checks);
    RUN(test_long_run);
    RUN(test_deep_nesting);
    RUN(test_long_rule_chain);
    RUN(test_generated_names_distinct);
    RUN(test_hostile_grammar_bounded);
    return t_summary();
}
