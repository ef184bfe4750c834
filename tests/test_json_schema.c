/* test_json_schema.c — JSON Schema to GBNF: the grammar of each schema accepts
 * documents valid against it and refuses invalid ones; unsupported keywords and
 * bad schemas give errors naming them. */
#include "tests/test.h"

#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "kernels/sbuf.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <pcre2.h>

static grammar *schema_grammar(const char *schema) {
    char *gbnf = NULL;
    llc_err err = {{0}};
    int rc = json_schema_text_to_gbnf(schema, &gbnf, &err);
    CHECKF(rc == 0, "%s: %s", schema, err.msg);
    if (rc) return NULL;
    grammar *g = NULL;
    rc = grammar_parse(gbnf, strlen(gbnf), &g, &err);
    CHECKF(rc == 0, "%s\n%s: %s", schema, gbnf, err.msg);
    free(gbnf);
    return g;
}

static bool matches(const grammar *g, const char *s) {
    grammar_state *st;
    if (!g || grammar_state_create(g, false, &st)) return false;
    bool ok = grammar_state_accept_bytes(st, s, strlen(s)) == 0 && grammar_state_complete(st);
    grammar_state_free(st);
    return ok;
}

typedef struct doc_case {
    const char *doc;
    bool valid;
} doc_case;

static void check_docs(const char *schema, const doc_case *docs, int n) {
    grammar *g = schema_grammar(schema);
    for (int i = 0; i < n; i++)
        CHECKF(matches(g, docs[i].doc) == docs[i].valid, "schema %s, doc %s: want %s", schema, docs[i].doc,
               docs[i].valid ? "valid" : "invalid");
    grammar_free(g);
}
#define DOCS(schema, ...)                                                                  \
    do {                                                                                   \
        static const doc_case d_[] = {__VA_ARGS__};                                        \
        check_docs(schema, d_, (int)(sizeof d_ / sizeof *d_));                             \
    } while (0)

static void test_primitives(void) {
    DOCS("{\"type\":\"boolean\"}", {"true", true}, {"false", true}, {"True", false}, {"1", false});
    DOCS("{\"type\":\"null\"}", {"null", true}, {"nul", false});
    DOCS("{\"type\":\"integer\"}", {"0", true}, {"-12", true}, {"012", false}, {"1.5", false}, {"-", false});
    DOCS("{\"type\":\"number\"}", {"1.5", true}, {"-0.25e10", true}, {"1.", false}, {".5", false});
    DOCS("{\"type\":\"number\",\"minimum\":0}", {"1.5", true}, {"-1", false});
    DOCS("{\"type\":\"string\"}", {"\"\"", true}, {"\"a b\\\"\\n\\u00e9\"", true}, {"\"é\"", true},
         {"\"a", false}, {"\"a\nb\"", false}, {"\"\\q\"", false},
         {"\"\\ud83d\"", false}); /* a lone surrogate is not text */
    DOCS("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", {"\"ab\"", true}, {"\"abc\"", true},
         {"\"a\"", false}, {"\"abcd\"", false});
    DOCS("{\"type\":\"string\",\"format\":\"date\"}", {"\"2024-02-29\"", true}, {"\"2024-13-01\"", false});
    DOCS("{\"type\":\"string\",\"format\":\"uuid\"}", {"\"123e4567-e89b-12d3-a456-426614174000\"", true},
         {"\"123e4567\"", false});
    DOCS("true", {"{\"a\":[1,null,\"x\"]}", true}, {"3", true}, {"[", false});
}

static void test_integer_ranges(void) {
    static const struct { double lo, hi; bool has_lo, has_hi; } r[] = {
        {0, 150, true, true}, {-5, 5, true, true}, {7, 7, true, true}, {10, 0, true, false},
        {0, 99, false, true}, {-120, -3, true, true}, {95, 1205, true, true}, {1, 0, true, false},
    };
    for (size_t k = 0; k < sizeof r / sizeof *r; k++) {
        char schema[160];
        int n = snprintf(schema, sizeof schema, "{\"type\":\"integer\"");
        if (r[k].has_lo) n += snprintf(schema + n, sizeof schema - (size_t)n, ",\"minimum\":%g", r[k].lo);
        if (r[k].has_hi) n += snprintf(schema + n, sizeof schema - (size_t)n, ",\"maximum\":%g", r[k].hi);
        snprintf(schema + n, sizeof schema - (size_t)n, "}");
        grammar *g = schema_grammar(schema);
        for (int v = -1500; v <= 1500; v++) {
            char doc[16];
            snprintf(doc, sizeof doc, "%d", v);
            bool want = (!r[k].has_lo || v >= r[k].lo) && (!r[k].has_hi || v <= r[k].hi);
            CHECKF(matches(g, doc) == want, "%s: %d", schema, v);
        }
        CHECK(!matches(g, "007"));
        grammar_free(g);
    }
    DOCS("{\"type\":\"integer\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":3}", {"0", false}, {"1", true},
         {"2", true}, {"3", false});
    /* draft 4: a boolean makes minimum / maximum exclusive */
    DOCS("{\"type\":\"integer\",\"minimum\":0,\"exclusiveMinimum\":true,\"maximum\":3,\"exclusiveMaximum\":true}",
         {"0", false}, {"1", true}, {"2", true}, {"3", false});
    DOCS("{\"type\":\"integer\",\"minimum\":0,\"exclusiveMinimum\":false,\"maximum\":3,\"exclusiveMaximum\":false}",
         {"-1", false}, {"0", true}, {"3", true}, {"4", false});
    /* both forms: the stricter wins */
    DOCS("{\"type\":\"integer\",\"minimum\":5,\"exclusiveMinimum\":2}", {"4", false}, {"5", true});
    DOCS("{\"type\":\"integer\",\"minimum\":2,\"exclusiveMinimum\":5}", {"5", false}, {"6", true});
    DOCS("{\"type\":\"integer\",\"minimum\":1.5,\"maximum\":3.5}", {"1", false}, {"2", true}, {"3", true}, {"4", false});
}

/* zod's .int() (and z.number().int().positive(), .safe()) bounds: ±(2^53 - 1).
 * min - 1 refused, min and max accepted, max + 1 refused. */
static void test_safe_integer_bounds(void) {
    DOCS("{\"type\":\"integer\",\"minimum\":-9007199254740991,\"maximum\":9007199254740991}",
         {"-9007199254740992", false}, {"-9007199254740991", true}, {"-9007199254740990", true},
         {"-1000000000000000", true}, {"-999999999999999", true}, {"-1", true}, {"0", true}, {"7", true},
         {"999999999999999", true}, {"1000000000000000", true}, {"9007199254740989", true},
         {"9007199254740990", true}, {"9007199254740991", true}, {"9007199254740992", false},
         {"9007199254740999", false}, {"9100000000000000", false}, {"10000000000000000", false},
         {"-0", false}, {"01", false}, {"1.0", false});
    DOCS("{\"type\":\"integer\",\"exclusiveMinimum\":0,\"maximum\":9007199254740991}", {"0", false}, {"1", true},
         {"9007199254740991", true}, {"9007199254740992", false}, {"-1", false});
    DOCS("{\"type\":\"integer\",\"minimum\":-9007199254740992,\"maximum\":-9007199254740990}",
         {"-9007199254740993", false}, {"-9007199254740992", true}, {"-9007199254740990", true},
         {"-9007199254740989", false});
    DOCS("{\"type\":\"integer\",\"minimum\":1000000000000000}", {"999999999999999", false},
         {"1000000000000000", true}, {"9999999999999999", true});
}

/* Decimal ranges: every number of up to three decimals in -3..3 (and a few
 * others) against each range, as the comparison of its value. */
static void test_number_ranges(void) {
    static const struct { const char *schema; double lo, hi; bool lo_ex, hi_ex; } r[] = {
        {"\"minimum\":0", 0, INFINITY, false, false},
        {"\"exclusiveMinimum\":0", 0, INFINITY, true, false},
        {"\"minimum\":-1.5,\"maximum\":2.25", -1.5, 2.25, false, false},
        {"\"minimum\":0.1,\"exclusiveMaximum\":0.3", 0.1, 0.3, false, true},
        {"\"exclusiveMinimum\":-2.5,\"exclusiveMaximum\":-0.5", -2.5, -0.5, true, true},
        {"\"maximum\":1", -INFINITY, 1, false, false},
        {"\"exclusiveMaximum\":0", -INFINITY, 0, false, true},
        {"\"minimum\":-0.05", -0.05, INFINITY, false, false},
        {"\"minimum\":1.5,\"maximum\":1.5", 1.5, 1.5, false, false},
        {"\"minimum\":0,\"maximum\":1", 0, 1, false, false},
        {"\"minimum\":-1,\"exclusiveMinimum\":true,\"maximum\":0.125,\"exclusiveMaximum\":true", -1, 0.125, true, true},
    };
    for (size_t k = 0; k < sizeof r / sizeof *r; k++) {
        char schema[200];
        snprintf(schema, sizeof schema, "{\"type\":\"number\",%s}", r[k].schema);
        grammar *g = schema_grammar(schema);
        for (int v = -3000; v <= 3000; v++) {
            for (int places = 0; places <= 4; places++) {
                int a = abs(v);
                char doc[32];
                if (places == 0 && a % 1000) continue;
                if (places == 0) snprintf(doc, sizeof doc, "%s%d", v < 0 ? "-" : "", a / 1000);
                else if (places == 4) snprintf(doc, sizeof doc, "%s%d.%03d5", v < 0 ? "-" : "", a / 1000, a % 1000);
                else if ((a % 1000) % (places == 1 ? 100 : places == 2 ? 10 : 1)) continue;
                else snprintf(doc, sizeof doc, "%s%d.%0*d", v < 0 ? "-" : "", a / 1000, places,
                              (a % 1000) / (places == 1 ? 100 : places == 2 ? 10 : 1));
                double x = strtod(doc, NULL);
                bool want = (r[k].lo_ex ? x > r[k].lo : x >= r[k].lo) && (r[k].hi_ex ? x < r[k].hi : x <= r[k].hi) &&
                            !(doc[0] == '-' && x == 0); /* "-0" is left out */
                CHECKF(matches(g, doc) == want, "%s: %s", schema, doc);
            }
        }
        CHECK(!matches(g, "01"));
        CHECK(!matches(g, "1."));
        CHECK(!matches(g, ".5"));
        CHECK(!matches(g, "1e0")); /* no exponents within bounds */
        grammar_free(g);
    }
    DOCS("{\"type\":\"number\",\"minimum\":0.1,\"maximum\":0.2}", {"0.1", true}, {"0.10", true}, {"0.2", true},
         {"0.09999999", false}, {"0.2000001", false}, {"0.15", true}, {"0.100000000000001", true});
    DOCS("{\"type\":\"number\",\"minimum\":-9007199254740991,\"maximum\":9007199254740991}",
         {"9007199254740991", true}, {"9007199254740991.5", false}, {"9007199254740990.99", true},
         {"-9007199254740991.01", false}, {"-9007199254740991", true}, {"12.5", true});
    DOCS("{\"type\":\"number\",\"minimum\":100,\"maximum\":120.5}", {"99.999", false}, {"100", true},
         {"100.0", true}, {"120.5", true}, {"120.50", true}, {"120.5001", false}, {"121", false}, {"1000", false});
}

static void test_objects(void) {
    const char *person = "{\"type\":\"object\",\"properties\":{"
                         "\"name\":{\"type\":\"string\",\"maxLength\":8},"
                         "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
                         "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",3]},\"minItems\":1,\"maxItems\":2},"
                         "\"nick\":{\"type\":[\"string\",\"null\"]}},"
                         "\"required\":[\"age\",\"name\"],\"additionalProperties\":false}";
    DOCS(person, {"{\"name\":\"Al\",\"age\":3}", true},
         {"{ \"name\": \"Al\", \"age\": 30, \"tags\": [\"a\", 3], \"nick\": null}", true},
         {"{\"name\":\"Al\",\"age\":3,\"nick\":\"x\"}", true},
         {"{\"age\":3}", false},                                 /* name is required */
         {"{\"name\":\"Al\",\"age\":151}", false},               /* out of range */
         {"{\"name\":\"Al\",\"age\":3,\"tags\":[]}", false},     /* minItems */
         {"{\"name\":\"Al\",\"age\":3,\"tags\":[\"a\",\"b\",3]}", false}, /* maxItems */
         {"{\"name\":\"Al\",\"age\":3,\"tags\":[\"c\"]}", false},  /* enum */
         {"{\"name\":\"Al\",\"age\":3,\"x\":1}", false},          /* no additional properties */
         {"{\"name\":\"Aloysius the great\",\"age\":3}", false});  /* maxLength */
    /* all optional, with additional properties of a schema */
    DOCS("{\"type\":\"object\",\"properties\":{\"a\":{\"const\":1},\"b\":{\"type\":\"boolean\"}},"
         "\"additionalProperties\":{\"type\":\"integer\"}}",
         {"{}", true}, {"{\"b\":true}", true}, {"{\"a\":1,\"b\":false}", true}, {"{\"a\":\"s\"}", false},
         {"{\"a\":1,\"zz\":5}", true}, {"{\"zz\":5,\"yy\":6}", true}, {"{\"zz\":\"s\"}", false});
    DOCS("{\"type\":\"object\"}", {"{\"x\":{\"y\":[1,2]}}", true}, {"[]", false});
    DOCS("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}",
         {"[1,\"a\"]", true}, {"[1]", false}, {"[\"a\",1]", false});
    DOCS("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":0}]}",
         {"5", true}, {"[]", true}, {"[1]", false});
}

static void test_formats(void) {
    DOCS("{\"type\":\"string\",\"format\":\"email\",\"title\":\"t\",\"description\":\"d\"}",
         {"\"a@b.co\"", true}, {"\"first.last+tag@mail.example.org\"", true}, {"\"x\"", false},
         {"\"a@b\"", false}, {"\"@b.co\"", false}, {"\"a..b@c.de\"", false}, {"\"a@-b.de\"", false},
         {"\"a b@c.de\"", false});
    DOCS("{\"type\":\"string\",\"format\":\"uri\"}", {"\"https://example.com/a?b=c#d\"", true},
         {"\"mailto:x@y.z\"", true}, {"\"urn:isbn:0451450523\"", true}, {"\"http://[::1]:80/%20\"", true},
         {"\"example.com\"", false}, {"\"1http://x\"", false}, {"\"http://a b\"", false}, {"\"http://%zz\"", false});
    DOCS("{\"type\":\"string\",\"format\":\"date-time\"}", {"\"2024-02-29T13:45:00Z\"", true},
         {"\"2024-02-29T13:45:00.123+02:00\"", true}, {"\"2024-02-29 13:45:00Z\"", false}, {"\"2024-02-29\"", false});
    DOCS("{\"type\":\"string\",\"format\":\"time\"}", {"\"23:59:59Z\"", true}, {"\"24:00:00Z\"", false});
    /* no type: the string keywords say it */
    DOCS("{\"format\":\"uuid\"}", {"\"123e4567-e89b-12d3-a456-426614174000\"", true}, {"3", false});
}

/* The grammar of a pattern accepts a string's JSON text exactly when PCRE2
 * (JavaScript's syntax) finds the pattern in it. */
static void check_pattern(const char *pattern, const char *const *texts, int n) {
    cJSON *schema = cJSON_CreateObject();
    cJSON_AddStringToObject(schema, "type", "string");
    cJSON_AddStringToObject(schema, "pattern", pattern);
    char *schema_text = cJSON_PrintUnformatted(schema);
    cJSON_Delete(schema);
    grammar *g = schema_grammar(schema_text);
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_ALT_BSUX, &code, &off, NULL);
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    CHECKF(re && md, "pcre2 cannot compile /%s/", pattern);
    for (int i = 0; i < n && re && md; i++) {
        cJSON *str = cJSON_CreateString(texts[i]);
        char *doc = cJSON_PrintUnformatted(str);
        cJSON_Delete(str);
        bool want = pcre2_match(re, (PCRE2_SPTR)texts[i], PCRE2_ZERO_TERMINATED, 0, 0, md, NULL) >= 0;
        CHECKF(matches(g, doc) == want, "/%s/ on %s: want %s", pattern, doc, want ? "a match" : "none");
        free(doc);
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    grammar_free(g);
    free(schema_text);
}
#define PATTERN(p, ...)                                                                    \
    do {                                                                                   \
        static const char *const t_[] = {__VA_ARGS__};                                     \
        check_pattern(p, t_, (int)(sizeof t_ / sizeof *t_));                               \
    } while (0)

static void test_patterns(void) {
    PATTERN("^[a-c]+$", "", "a", "abcabc", "abd", "A", " a");
    PATTERN("^\\d{3}-\\d{4}$", "555-1234", "555-123", "5555-1234", "abc-defg", "555-12345");
    PATTERN("^(foo|ba[rz])?x*$", "", "foo", "bar", "baz", "bax", "fooxxx", "xx", "foobar");
    PATTERN("^a{2,}b{0,2}c{1}$", "aac", "aaaabbc", "ac", "aabbbc", "aab");
    PATTERN("^(?:ab)+(?<tail>c|d)$", "abc", "ababd", "ab", "abe", "c");
    PATTERN("^.\\..$", "a.b", "ab.", "a\"b", "\".\\", "a..", "\xc3\xa9.\xc3\xa9");
    PATTERN("^[^a-z\"]*$", "ABC", "abc", "A\"B", "\\\\", "A\nB", "\xe2\x82\xac");
    PATTERN("^\\w+\\s\\S+$", "ab cd", "ab\tcd", "a_1 \xc3\xa9", "ab  cd", "ab", "ab\ncd");
    PATTERN("^[\\d\\-+.]*$", "+1.5-2", "1e5", "");
    PATTERN("^\\u00e9\\x41[\\]\\\\]\\/$", "\xc3\xa9" "A]/", "\xc3\xa9" "A\\/", "eA]/");
    PATTERN("^\"quoted\" \\\\ path$", "\"quoted\" \\ path", "quoted \\ path");
    PATTERN("^line\\nbreak\\t$", "line\nbreak\t", "line break");
    PATTERN("^a$|^b+$|c", "a", "bbb", "xcx", "ab", "", "c");
    PATTERN("cat", "cat", "concatenate", "ca", "");             /* unanchored: found anywhere */
    PATTERN("^cat", "cats", "a cat");
    PATTERN("dog$", "hotdog", "dogs");
    PATTERN("^(a|)b$", "ab", "b", "aab");
    PATTERN("^x{2}?y+?$", "xxy", "xxyyy", "xy");
    /* zod's email, uuid and datetime */
    PATTERN("^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$",
            "a@b.co", "a.b-c+d@x-y.example.org", "a@b.c", "a@b", "a@@b.co", ".a@b.co");
    PATTERN("^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|"
            "00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$",
            "123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-92d3-a456-426614174000",
            "00000000-0000-0000-0000-000000000000", "123e4567e89b12d3a456426614174000");
    PATTERN("^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:"
            "(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))"
            "T(?:(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d+)?(?:Z))$",
            "2024-02-29T10:00:00Z", "2023-02-29T10:00:00Z", "2023-04-31T10:00:00Z", "2023-12-31T23:59:59.5Z",
            "2023-12-31T24:00:00Z", "2023-12-31T10:00:00+01:00");
}

static void test_objects_more(void) {
    /* zod's z.record(z.string(), z.number()) and pydantic's dict[str, int] */
    DOCS("{\"type\":\"object\",\"propertyNames\":{\"type\":\"string\"},\"additionalProperties\":{\"type\":\"number\"}}",
         {"{}", true}, {"{\"a\":1,\"b\":2.5}", true}, {"{\"a\":\"x\"}", false});
    DOCS("{\"type\":\"object\",\"propertyNames\":{\"pattern\":\"^[a-z]+$\"},\"additionalProperties\":{\"type\":\"integer\"}}",
         {"{\"ab\":1,\"c\":2}", true}, {"{\"Ab\":1}", false}, {"{\"a1\":1}", false});
    DOCS("{\"type\":\"object\",\"propertyNames\":{\"enum\":[\"x\",\"y\"]}}", {"{\"x\":[1]}", true}, {"{\"z\":1}", false});
    DOCS("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"boolean\"},\"minProperties\":1,\"maxProperties\":2}",
         {"{}", false}, {"{\"a\":true}", true}, {"{\"a\":true,\"b\":false}", true}, {"{\"a\":true,\"b\":false,\"c\":true}", false});
    DOCS("{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},\"required\":[\"id\"],"
         "\"additionalProperties\":{\"type\":\"string\"},\"minProperties\":2,\"maxProperties\":3}",
         {"{\"id\":1}", false}, {"{\"id\":1,\"a\":\"x\"}", true}, {"{\"id\":1,\"a\":\"x\",\"b\":\"y\"}", true},
         {"{\"id\":1,\"a\":\"x\",\"b\":\"y\",\"c\":\"z\"}", false});
    /* trivially met counts are accepted with optional properties */
    DOCS("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"required\":[\"a\"],"
         "\"minProperties\":1,\"maxProperties\":2}", {"{\"a\":1}", true}, {"{\"a\":1,\"b\":2}", true}, {"{}", false});
}

static void test_tuples(void) {
    /* zod's z.tuple([z.string(), z.number()]) */
    DOCS("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"number\"}],\"items\":false,"
         "\"minItems\":2,\"maxItems\":2}", {"[\"a\",1]", true}, {"[\"a\"]", false}, {"[\"a\",1,2]", false}, {"[1,\"a\"]", false});
    /* prefixItems and then items of a schema */
    DOCS("{\"type\":\"array\",\"prefixItems\":[{\"const\":\"head\"}],\"items\":{\"type\":\"integer\"},\"maxItems\":3}",
         {"[\"head\"]", true}, {"[\"head\",1,2]", true}, {"[\"head\",1,2,3]", false}, {"[\"head\",\"x\"]", false}, {"[]", false});
    /* no items: anything after the tuple */
    DOCS("{\"prefixItems\":[{\"type\":\"boolean\"}]}", {"[true]", true}, {"[true,\"x\",{}]", true}, {"[1]", false});
    /* draft 4: items as an array, additionalItems */
    DOCS("{\"type\":\"array\",\"items\":[{\"type\":\"integer\"},{\"type\":\"null\"}],\"additionalItems\":false}",
         {"[1,null]", true}, {"[1,null,2]", false}, {"[null,1]", false});
    DOCS("{\"type\":\"array\",\"items\":[{\"type\":\"integer\"}],\"additionalItems\":{\"type\":\"string\"},\"minItems\":2}",
         {"[1]", false}, {"[1,\"a\"]", true}, {"[1,\"a\",\"b\"]", true}, {"[1,2]", false});
    /* maxItems below the tuple's length: the first members only */
    DOCS("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"integer\"}],\"maxItems\":1}",
         {"[1]", true}, {"[1,2]", false});
    DOCS("{\"type\":\"array\",\"items\":false}", {"[]", true}, {"[1]", false});
}

/* Many optional properties: the grammar grows linearly (it once held, for each
 * property, every later one: 1.4 MB for 200) and still keeps their order. */
static void test_many_optional_properties(void) {
    enum { N = 400 };
    sbuf b = {0};
    sb_str(&b, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < N; i++) sb_printf(&b, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    sb_str(&b, "}}");
    char *gbnf = NULL;
    llc_err err = {{0}};
    CHECKF(json_schema_text_to_gbnf(sb_cstr(&b), &gbnf, &err) == 0, "%s", err.msg);
    CHECKF(gbnf && strlen(gbnf) < (size_t)N * 400, "%zu bytes of grammar for %d properties", gbnf ? strlen(gbnf) : 0, N);
    free(gbnf);
    grammar *g = schema_grammar(sb_cstr(&b));
    CHECK(matches(g, "{}"));
    CHECK(matches(g, "{\"p3\": 1, \"p250\": 2, \"p399\": 3}"));
    CHECK(matches(g, "{\"p399\": 3}"));
    CHECK(!matches(g, "{\"p250\": 2, \"p3\": 1}"));  /* out of order */
    CHECK(!matches(g, "{\"p3\": 1, \"p3\": 1}"));    /* twice */
    CHECK(!matches(g, "{, \"p3\": 1}"));
    grammar_free(g);
    sb_free(&b);
}

static void test_refs(void) {
    const char *tree = "{\"$ref\":\"#/$defs/node\",\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{"
                       "\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},"
                       "\"required\":[\"v\"]}}}";
    DOCS(tree, {"{\"v\":1}", true}, {"{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]},{\"v\":4}]}", true},
         {"{\"v\":1,\"kids\":[{}]}", false});
    DOCS("{\"definitions\":{\"c\":{\"enum\":[\"red\",\"green\"]}},\"type\":\"array\",\"items\":{\"$ref\":\"#/definitions/c\"}}",
         {"[\"red\",\"green\"]", true}, {"[\"blue\"]", false});
}

static void test_errors(void) {
    static const struct { const char *schema, *msg; } bad[] = {
        {"{\"type\":\"string\",\"pattern\":\"^(a)\\\\1$\"}", "schema: 'pattern' uses a backreference"},
        {"{\"type\":\"string\",\"pattern\":\"^(?=a)\\\\w$\"}", "'pattern' uses a lookahead or lookbehind '(?=...)'"},
        {"{\"type\":\"string\",\"pattern\":\"(?<!a)b\"}", "'pattern' uses a lookahead or lookbehind '(?<!...)'"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\bword\"}", "'pattern' uses a word boundary (\\b)"},
        {"{\"type\":\"string\",\"pattern\":\"a^b\"}", "'pattern' has '^' inside"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\p{L}\"}", "'pattern' uses a Unicode property"},
        {"{\"type\":\"string\",\"pattern\":\"(a\"}", "'pattern' is not a regular expression: missing closing parenthesis"},
        {"{\"type\":\"string\",\"pattern\":\"^a$\",\"maxLength\":3}", "'pattern' together with 'minLength'/'maxLength'"},
        {"{\"type\":\"string\",\"format\":\"ipv4\"}", "'format': 'ipv4' is not supported"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"propertyNames\":{\"pattern\":\"^a$\"}}",
         "schema.propertyNames: is supported only without 'properties'"},
        {"{\"type\":\"object\",\"propertyNames\":{\"type\":\"integer\"}}", "'type' must be \"string\""},
        {"{\"type\":\"object\",\"propertyNames\":{\"anyOf\":[]}}", "'anyOf' is not supported in 'propertyNames'"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}},\"minProperties\":1}",
         "'minProperties'/'maxProperties' with optional properties"},
        {"{\"type\":\"array\",\"prefixItems\":[{}],\"items\":false,\"minItems\":2}", "'minItems' asks for more items"},
        {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "'minItems' is larger than 'maxItems'"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\",\"multipleOf\":2}}}",
         "schema.properties.a: 'multipleOf' is not supported"},
        {"{\"$ref\":\"http://example.com/s.json\"}", "only local references"},
        {"{\"$ref\":\"#/$defs/missing\"}", "points at nothing"},
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":1}", "no integer lies between"},
        {"{\"type\":\"number\",\"minimum\":2,\"exclusiveMaximum\":2}", "no number lies between"},
        {"{\"type\":\"integer\",\"maximum\":1e16}", "beyond ±2^53"},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":true}", "'exclusiveMinimum': true needs 'minimum'"},
        {"{\"type\":\"integer\",\"minimum\":\"1\"}", "'minimum' must be a number"},
        {"{\"type\":\"strin\"}", "unknown type 'strin'"},
        {"{\"allOf\":[{\"type\":\"integer\"},{\"minimum\":1}]}", "'allOf' is supported with one schema only"},
        {"{\"type\":\"object\",\"properties\":{},\"required\":[\"x\"]}", "required property 'x'"},
        {"false", "allows nothing"},
        {"{not json", "not valid JSON"},
        {"{\"$ref\":\"#/$defs/a\",\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}}}", ""}, /* caught by the grammar */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *gbnf = NULL;
        llc_err err = {{0}};
        int rc = json_schema_text_to_gbnf(bad[i].schema, &gbnf, &err);
        if (rc == 0) { /* only the self-reference converts; the grammar refuses it */
            grammar *g = NULL;
            rc = grammar_parse(gbnf, strlen(gbnf), &g, &err);
            grammar_free(g);
            free(gbnf);
        }
        CHECKF(rc != 0 && strstr(err.msg, bad[i].msg), "%s: got '%s'", bad[i].schema, err.msg);
    }
}

static void test_json_object_grammar(void) {
    grammar *g = NULL;
    llc_err err;
    CHECK(grammar_parse(json_object_gbnf(), strlen(json_object_gbnf()), &g, &err) == 0);
    CHECK(matches(g, "{}"));
    CHECK(matches(g, "{\"a\": [1, {\"b\": null}], \"c\": \"x\"}"));
    CHECK(!matches(g, "[1]"));
    CHECK(!matches(g, "{\"a\":}"));
    CHECK(!matches(g, "{} "));      /* the document ends with its object */
    grammar_free(g);
}

int main(void) {
    RUN(test_primitives);
    RUN(test_integer_ranges);
    RUN(test_safe_integer_bounds);
    RUN(test_number_ranges);
    RUN(test_objects);
    RUN(test_formats);
    RUN(test_patterns);
    RUN(test_objects_more);
    RUN(test_tuples);
    RUN(test_many_optional_properties);
    RUN(test_refs);
    RUN(test_errors);
    RUN(test_json_object_grammar);
    return t_summary();
}
