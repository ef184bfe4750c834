/* test_jinja.c — the Jinja interpreter: language features one by one, limits
 * and errors on hostile templates, and every real chat template in
 * ../shared/reference/templates rendered byte for byte as llama.cpp renders it. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/template/chat_jinja.h"
#include "engine/template/jinja.h"
#include "tests/test.h"

#define REF_DIR "../shared/reference/templates"

/* Renders src with vars given as JSON text; returns malloc'd output or NULL (err set). */
static char *render(const char *src, const char *vars_json, llc_err *err) {
    jinja_tpl *t = NULL;
    if (jinja_parse(src, strlen(src), &t, err)) return NULL;
    cJSON *vars = vars_json ? cJSON_Parse(vars_json) : NULL;
    char *out = NULL;
    jinja_opts o = {.now = 1700000000};
    jinja_render(t, vars, &o, &out, NULL, err);
    cJSON_Delete(vars);
    jinja_free(t);
    return out;
}

static int expect(const char *src, const char *vars, const char *want) {
    llc_err err = {{0}};
    char *got = render(src, vars, &err);
    int ok = got && strcmp(got, want) == 0;
    if (!ok)
        fprintf(stderr, "    template: %s\n    want: [%s]\n    got:  [%s] %s\n", src, want,
                got ? got : "(error)", got ? "" : err.msg);
    free(got);
    return ok;
}

static int expect_error(const char *src, const char *vars, const char *needle) {
    llc_err err = {{0}};
    char *got = render(src, vars, &err);
    int ok = !got && strstr(err.msg, needle) != NULL && strchr(err.msg, '\n') == NULL;
    if (!ok) fprintf(stderr, "    template: %s\n    want error with [%s], got [%s] [%s]\n", src, needle,
                     got ? got : "(no output)", err.msg);
    free(got);
    return ok;
}

static void test_text_and_whitespace(void) {
    CHECK(expect("hello", NULL, "hello"));
    CHECK(expect("a {{ 1 + 2 }} b", NULL, "a 3 b"));
    CHECK(expect("a  {{- 'x' -}}  b", NULL, "axb"));
    CHECK(expect("{# comment #}x", NULL, "x"));
    CHECK(expect("a {#- c -#} b", NULL, "ab"));
    /* trim_blocks: newline after a block tag goes; lstrip_blocks: indentation before it */
    CHECK(expect("{% if true %}\n  yes\n{% endif %}\n", NULL, "  yes\n"));
    CHECK(expect("x\n    {% if true %}y{% endif %}", NULL, "x\ny"));
    CHECK(expect("x  {% if true %}y{% endif %}", NULL, "x  y")); /* not at line start */
    CHECK(expect("{%+ if true %}y{% endif %}", NULL, "y"));
    CHECK(expect("{% raw %}{{ not evaluated }}{% endraw %}", NULL, "{{ not evaluated }}"));
    CHECK(expect("{{ {'a': {'b': 1}}['a']['b'] }}", NULL, "1"));
}

static void test_values_and_operators(void) {
    CHECK(expect("{{ none }} {{ true }} {{ false }} {{ 1.5 }} {{ 2.0 }} {{ -3 }}", NULL, "None True False 1.5 2.0 -3"));
    CHECK(expect("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}", NULL, "3 -4 1 2 3.5 1024"));
    CHECK(expect("{{ 'a' ~ 1 ~ none }} {{ 'ab' + 'cd' }} {{ 'ab' * 3 }}", NULL, "a1None abcd ababab"));
    CHECK(expect("{{ [1, 'a', none, true] }} {{ {'k': 'v'} }} {{ (1,) }}", NULL, "[1, 'a', None, True] {'k': 'v'} (1,)"));
    CHECK(expect("{{ 'x' in 'axb' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}", NULL,
                 "True True True True"));
    CHECK(expect("{{ 1 < 2 and 'b' > 'a' }} {{ 0 or 'y' }} {{ '' and 'z' }}|", NULL, "True y |"));
    CHECK(expect("{{ 'yes' if 1 == 1.0 else 'no' }} {{ 'no' if false }}|", NULL, "yes |"));
    CHECK(expect("{{ 'héllo'[1] }} {{ 'héllo'[1:3] }} {{ 'abc'[::-1] }} {{ [1,2,3,4][1:] }} {{ [1,2,3][-1] }}", NULL,
                 "é él cba [2, 3, 4] 3"));
    CHECK(expect("{{ \"it's\" }} {{ ['it\\'s'] }} {{ 'a\\nb' }}", NULL, "it's [\"it's\"] a\nb"));
    CHECK(expect("{{ x.y.z }}|{{ x is defined }}|{{ m.content }}", "{\"m\": {\"content\": \"c\"}}", "|False|c"));
}

static void test_statements(void) {
    CHECK(expect("{% for x in [1,2,3] %}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }},{% endfor %}",
                 NULL, "0TrueFalse3,1FalseFalse3,2FalseTrue3,"));
    CHECK(expect("{% for x in [] %}a{% else %}empty{% endfor %}", NULL, "empty"));
    CHECK(expect("{% for x in [1,2,3,4] if x % 2 == 0 %}{{ x }}{{ loop.length }}{% endfor %}", NULL, "2242"));
    CHECK(expect("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", NULL, "a=1;b=2;"));
    CHECK(expect("{% for x in [1,2,3] %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}", NULL, "1"));
    CHECK(expect("{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}", NULL, "13"));
    CHECK(expect("{% for x in 'ab' %}{{ loop.previtem }}{{ x }}{{ loop.nextitem }}|{% endfor %}", NULL, "ab|ab|"));
    CHECK(expect("{% if 0 %}a{% elif '' %}b{% elif [1] %}c{% else %}d{% endif %}", NULL, "c"));
    CHECK(expect("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", NULL, "1"));
    CHECK(expect("{% set ns = namespace(x=1) %}{% for i in [1,2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}",
                 NULL, "4"));
    CHECK(expect("{% set a, b = [1, 2] %}{{ b }}{{ a }}", NULL, "21"));
    CHECK(expect("{% set s %}in {{ 1 }} block {% endset %}[{{ s | trim }}]", NULL, "[in 1 block]"));
    CHECK(expect("{% macro m(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b='x') }}{{ m(a=3) }}",
                 NULL, "<1B><2x><3B>"));
    CHECK(expect("{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}inner{% endcall %}", NULL, "[inner]"));
    CHECK(expect("{% filter upper %}abc{% endfilter %}", NULL, "ABC"));
    CHECK(expect("{% generation %}g{% endgeneration %}", NULL, "g"));
}

static void test_filters_tests_methods(void) {
    CHECK(expect("{{ '  a b \\n' | trim }}|{{ [1,2] | length }}|{{ 'héllo' | length }}|{{ x | default('d') }}", NULL,
                 "a b|2|5|d"));
    CHECK(expect("{{ '' | default('d', true) }}{{ 'ab' | upper }}{{ 'AB' | lower }}", NULL, "dABab"));
    CHECK(expect("{{ {'b': [1, 2.5, none], 'a': 'é\"'} | tojson }}", NULL, "{\"b\": [1, 2.5, null], \"a\": \"é\\\"\"}"));
    CHECK(expect("{{ {'a': [1]} | tojson(indent=2) }}", NULL, "{\n  \"a\": [\n    1\n  ]\n}"));
    CHECK(expect("{{ [1,2,3] | join(', ') }}|{{ 'a-b' | replace('-', '+') }}|{{ [3,1,2] | sort | list }}", NULL,
                 "1, 2, 3|a+b|[1, 2, 3]"));
    CHECK(expect("{{ [{'r':'u','n':1},{'r':'a','n':2}] | selectattr('r', 'equalto', 'a') | map(attribute='n') | list }}",
                 NULL, "[2]"));
    CHECK(expect("{{ [{'r':'u'},{'r':'a'}] | rejectattr('r', 'equalto', 'a') | list | length }}", NULL, "1"));
    CHECK(expect("{{ [1,2,3] | first }}{{ [1,2,3] | last }}{{ 'a\\nb' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}",
                 NULL, "13a\n  b|  a\n  b"));
    CHECK(expect("{{ {'b':1,'A':2} | dictsort }}{{ '42' | int + 1 }}{{ 3 | string }}", NULL, "[('A', 2), ('b', 1)]433"));
    CHECK(expect("{{ x is none }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ y is not defined }}",
                 "{\"x\": null}", "TrueTrueTrueTrueTrue"));
    CHECK(expect("{{ ' ab '.strip() }}|{{ 'a,b,c'.split(',') }}|{{ 'a b'.split() }}|{{ 'abc'.startswith('ab') }}"
                 "{{ 'abc'.endswith(('x', 'c')) }}|{{ 'x{}y{}'.format(1, 2) }}|{{ 'xxa'.lstrip('x') }}",
                 NULL, "ab|['a', 'b', 'c']|['a', 'b']|TrueTrue|x1y2|a"));
    CHECK(expect("{{ d.get('a') }}{{ d.get('z', 'no') }}{{ d.get('q') }}{{ d.keys() | list }}{{ d['a'] }}",
                 "{\"d\": {\"a\": 1}}", "1noNone['a']1"));
    CHECK(expect("{% set l = [] %}{% set _ = l.append(1) %}{{ l }}{{ '%s-%d' % ('a', 3) }}", NULL, "[1]a-3"));
    CHECK(expect("{{ range(3) | list }}{{ range(1, 7, 2) | list }}", NULL, "[0, 1, 2][1, 3, 5]"));
    CHECK(expect("{{ strftime_now('%Y') }}", NULL, "2023"));
    CHECK(expect("{{ '{\"a\": 1}' | from_json | tojson }}", NULL, "{\"a\": 1}"));
}

static void test_errors_are_one_line(void) {
    CHECK(expect_error("{{ raise_exception('Roles must alternate') }}", NULL, "template error: Roles must alternate"));
    CHECK(expect_error("{% if x %}", NULL, "missing {% endif %}"));
    CHECK(expect_error("{{ 1 + }}", NULL, "line 1"));
    CHECK(expect_error("a\nb\n{% for %}", NULL, "line 3"));
    CHECK(expect_error("{{ x | nosuchfilter }}", NULL, "unknown filter 'nosuchfilter'"));
    CHECK(expect_error("{{ 'a' ", NULL, "unclosed"));
    CHECK(expect_error("{% endfor %}", NULL, "endfor"));
    CHECK(expect_error("{{ 1 / 0 }}", NULL, "division by zero"));
    CHECK(expect_error("{{ 'a' + 1 }}", NULL, "cannot add"));
}

/* Dict literals keep non-string keys as they are (Python's dicts do): ByteDance
 * Seed-OSS looks its thinking budget up in {0: 0, 512: 128, ...} with
 * `thinking_budget <= k` over `| dictsort`. Lookups still go by the key's
 * text, so d[512] finds the int key. */
static void test_int_dict_keys(void) {
    const char *d = "{% set d = {512: 'b', 0: 'a'} %}";
    char src[256];
    snprintf(src, sizeof src, "%s{%% for k, v in d | dictsort %%}{{ k + 1 }}{{ v }}{%% endfor %%}", d);
    CHECK(expect(src, NULL, "1a513b"));
    snprintf(src, sizeof src, "%s{%% for k, v in d | dictsort %%}{{ 100 <= k }} {%% endfor %%}", d);
    CHECK(expect(src, NULL, "False True "));
    snprintf(src, sizeof src, "%s{{ d[512] }} {{ d }} {{ d | tojson }}", d);
    CHECK(expect(src, NULL, "b {512: 'b', 0: 'a'} {\"512\": \"b\", \"0\": \"a\"}"));
    snprintf(src, sizeof src, "%s{{ d.keys() | list }} {{ d.items() | list }}", d);
    CHECK(expect(src, NULL, "[512, 0] [(512, 'b'), (0, 'a')]"));
    snprintf(src, sizeof src, "%s{%% set e = d.copy() %%}{%% set _ = e.pop(512) %%}{{ e }} {{ dict(d) }}", d);
    CHECK(expect(src, NULL, "{0: 'a'} {512: 'b', 0: 'a'}"));
    CHECK(expect("{% set d = {1.5: 'x', true: 'y', none: 'z'} %}{{ d }}", NULL, "{1.5: 'x', True: 'y', None: 'z'}"));
}

static void test_limits(void) {
    /* deep nesting: refused at parse time, not a stack overflow */
    size_t n = 5000;
    char *deep = malloc(n * 32 + 32);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += (size_t)sprintf(deep + k, "{%% if true %%}");
    for (size_t i = 0; i < n; i++) k += (size_t)sprintf(deep + k, "{%% endif %%}");
    llc_err err = {{0}};
    jinja_tpl *t = NULL;
    CHECK(jinja_parse(deep, k, &t, &err) == LLC_ERR_RANGE);
    CHECK(strstr(err.msg, "nested too deeply") != NULL);
    k = 0;
    for (size_t i = 0; i < n; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (size_t i = 0; i < n; i++) deep[k++] = ')';
    char *expr = malloc(k + 8);
    sprintf(expr, "{{ %.*s }}", (int)k, deep);
    CHECK(jinja_parse(expr, strlen(expr), &t, &err) == LLC_ERR_RANGE);
    free(expr);
    free(deep);
    /* huge loops and runaway recursion end with a clear error */
    CHECK(expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL,
                       "too"));
    CHECK(expect_error("{{ range(100000000) }}", NULL, "too long"));
    CHECK(expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, "nested too deeply"));
    CHECK(expect_error("{% set ns = namespace(s='xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx') %}{% for i in range(40) %}"
                       "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                       NULL, "too"));
    /* a limit the caller sets */
    jinja_opts o = {.max_steps = 1000};
    const char *loop = "{% for i in range(10000) %}{{ i }}{% endfor %}";
    CHECK(jinja_parse(loop, strlen(loop), &t, &err) == 0);
    char *out = NULL;
    CHECK(jinja_render(t, NULL, &o, &out, NULL, &err) == LLC_ERR_RANGE);
    CHECK(out == NULL);
    jinja_free(t);
    /* truncated and garbage input: errors, never crashes */
    static const char *bad[] = {"{{", "{%", "{#", "{% for x in %}", "{% set %}", "{{ a[ }}", "{{ 'x }}",
                                "{% macro %}", "{{ a | }}", "{% if %}{% endif %}", "{{ ) }}", "{{ {1: } }}",
                                "{% for x in y %}{% endif %}", "{{ x is }}", "\xff\xfe{{ \xff }}"};
    for (size_t i = 0; i < LLC_ARRAY_LEN(bad); i++) {
        char *o2 = render(bad[i], NULL, &err);
        CHECKF(o2 == NULL, "%s rendered", bad[i]);
        free(o2);
    }
}

/* ---- the reference renders ---- */

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    if (p) p[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return p;
}

static time_t noon_of(const char *ymd) {
    struct tm tm = {0};
    if (!ymd || sscanf(ymd, "%d-%d-%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) != 3) return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_hour = 12;
    tm.tm_isdst = -1;
    return mktime(&tm);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Renders every case of every NAME.json; returns the number of failing cases. */
static int run_reference(int *n_cases, int *n_templates, int *n_templates_ok, bool verbose) {
    DIR *d = opendir(REF_DIR);
    if (!d) return -1;
    char *names[256];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 256) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0) names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, cmp_names);
    int failed = 0;
    *n_cases = 0;
    *n_templates = nn;
    *n_templates_ok = 0;
    for (int i = 0; i < nn; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", REF_DIR, names[i]);
        char *json = slurp(path, NULL);
        cJSON *ref = json ? cJSON_Parse(json) : NULL;
        free(json);
        const cJSON *tn = cJSON_GetObjectItem(ref, "template");
        snprintf(path, sizeof path, "%s/%s", REF_DIR, cJSON_IsString(tn) ? tn->valuestring : "?");
        size_t len = 0;
        char *src = slurp(path, &len);
        const char *bos = cJSON_GetStringValue(cJSON_GetObjectItem(ref, "bos_token"));
        const char *eos = cJSON_GetStringValue(cJSON_GetObjectItem(ref, "eos_token"));
        bool strip = cJSON_IsTrue(cJSON_GetObjectItem(ref, "leading_bos_stripped"));
        chat_jinja *cj = NULL;
        llc_err err = {{0}};
        int bad = 0;
        if (!src || chat_jinja_create(src, len, bos, eos, &cj, &err)) {
            fprintf(stderr, "  %s: %s\n", names[i], src ? err.msg : "cannot read the template");
            bad = cJSON_GetArraySize(cJSON_GetObjectItem(ref, "cases"));
            *n_cases += bad;
        } else {
            const cJSON *c;
            cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases")) {
                (*n_cases)++;
                const char *want = cJSON_GetStringValue(cJSON_GetObjectItem(c, "prompt"));
                time_t now = noon_of(cJSON_GetStringValue(cJSON_GetObjectItem(c, "date")));
                char *got = NULL;
                int rc = chat_jinja_apply(cj, cJSON_GetObjectItem(c, "messages"), cJSON_GetObjectItem(c, "tools"),
                                          cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt")), strip,
                                          now ? now : 1700000000, NULL, &got, &err);
                if (rc || !want || strcmp(got, want) != 0) {
                    bad++;
                    const char *cn = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
                    if (rc) fprintf(stderr, "  %s/%s: %s\n", names[i], cn, err.msg);
                    else if (verbose) fprintf(stderr, "  %s/%s:\n--- want\n%s\n--- got\n%s\n---\n", names[i], cn, want, got);
                    else {
                        size_t k = 0;
                        while (want && got[k] && got[k] == want[k]) k++;
                        fprintf(stderr, "  %s/%s: differs at byte %zu: want [%.40s] got [%.40s]\n", names[i], cn, k,
                                want ? want + k : "", got + k);
                    }
                }
                free(got);
            }
        }
        if (!bad) (*n_templates_ok)++;
        failed += bad;
        chat_jinja_free(cj);
        free(src);
        cJSON_Delete(ref);
        free(names[i]);
    }
    return failed;
}


/* Fuzz-ish: every reference template with random bytes changed, cut short or
 * duplicated, parsed and rendered: it renders or fails with one line, never
 * crashes (this binary runs under AddressSanitizer). */
static void test_mutated_templates(void) {
    DIR *d = opendir(REF_DIR);
    CHECK(d != NULL);
    if (!d) return;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
#define NEXT() (rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17, rng)
    static const char tokens[][8] = {"{%", "%}", "{{", "}}", "{#", "#}", "-", "(", ")", "[", "]", "'", "\"",
                                     "|", ".", "if", "for", "end", " ", "\n", "\\", "\xff", "loop", "0"};
    const char *vars = "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", "
                       "\"content\": \"u\"}, {\"role\": \"assistant\", \"content\": \"a\"}], "
                       "\"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";
    cJSON *v = cJSON_Parse(vars);
    int runs = 0, rendered = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 6, ".jinja") != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", REF_DIR, e->d_name);
        size_t n = 0;
        char *src = slurp(path, &n);
        if (!src) continue;
        char *buf = malloc(2 * n + 64);
        for (int k = 0; k < 24; k++) {
            memcpy(buf, src, n);
            size_t m = n;
            int edits = 1 + (int)(NEXT() % 4);
            for (int j = 0; j < edits && m > 0; j++) {
                size_t at = NEXT() % m;
                switch (NEXT() % 4) {
                case 0: buf[at] = (char)(NEXT() & 0xff); break;                         /* change a byte */
                case 1: m = at; break;                                                  /* cut short */
                case 2: memmove(buf + at, buf + at + 1, m - at - 1), m--; break;        /* delete */
                default: {                                                              /* insert a token */
                    const char *t = tokens[NEXT() % LLC_ARRAY_LEN(tokens)];
                    size_t tl = strlen(t);
                    if (m + tl > 2 * n + 32) break;
                    memmove(buf + at + tl, buf + at, m - at);
                    memcpy(buf + at, t, tl);
                    m += tl;
                }
                }
            }
            jinja_tpl *t = NULL;
            llc_err err = {{0}};
            char *out = NULL;
            runs++;
            int rc = jinja_parse(buf, m, &t, &err);
            if (rc == 0) {
                jinja_opts o = {.max_steps = 200000, .max_output = 1 << 20, .max_memory = 64 << 20};
                rc = jinja_render(t, v, &o, &out, NULL, &err);
                rendered += rc == 0;
            }
            CHECKF(rc == 0 || (err.msg[0] && !strchr(err.msg, '\n')), "%s mutation %d: bad error [%s]",
                   e->d_name, k, err.msg);
            free(out);
            jinja_free(t);
        }
        free(buf);
        free(src);
    }
#undef NEXT
    closedir(d);
    cJSON_Delete(v);
    CHECK(runs >= 40 * 24);
    printf("     %d mutated templates: %d rendered, the rest failed cleanly\n", runs, rendered);
}

static void test_reference_templates(void) {
    int n_cases = 0, n_t = 0, n_ok = 0;
    int failed = run_reference(&n_cases, &n_t, &n_ok, getenv("JINJA_VERBOSE") != NULL);
    CHECKF(failed == 0, "%d of %d reference cases differ", failed, n_cases);
    CHECK(n_t >= 40);
    printf("     reference templates: %d of %d render every case exactly (%d of %d cases)\n", n_ok, n_t,
           n_cases - failed, n_cases);
}

int main(void) {
    RUN(test_text_and_whitespace);
    RUN(test_values_and_operators);
    RUN(test_statements);
    RUN(test_filters_tests_methods);
    RUN(test_errors_are_one_line);
    RUN(test_int_dict_keys);
    RUN(test_limits);
    RUN(test_mutated_templates);
    RUN(test_reference_templates);
    return t_summary();
}
