/* srv_tools_xml.c — tool_choice "required" for the XML-style tool formats
 * (Qwen3-Coder, GLM, MiniMax-M2 and M3: engine/template/toolcall_xml.h): a GBNF grammar
 * for one call in the format's markup, written from the same marker table the
 * reader uses, e.g. for Qwen3-Coder
 *
 *   root ::= "<tool_call>\n" ( call-0 | call-1 ) "</tool_call>"
 *   call-0 ::= "<function=" "get_weather" ">" "\n" pair-0-0 ( pair-0-1 )? "</function>" "\n"
 *   pair-0-0 ::= "<parameter=" "location" ">" "\n" xml-text "\n" "</parameter>" "\n"
 *
 * Required parameters come first, then each optional one may follow, in the
 * schema's order. A "string" value is raw text (xml-text: no "</" in it, nor a
 * '<' last), a
 * string enum or const its raw values; any other value is JSON valid against
 * the parameter's schema (json_schema_to_gbnf, its rules renamed apart). What
 * cannot be enforced (a string with pattern, format or length) is an error
 * naming the tool and parameter, never a looser grammar. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/server/srv_internal.h"
#include "engine/grammar/json_schema.h"
#include "engine/template/toolcall_xml.h"

/* s as a GBNF string literal. */
static void lit(sbuf *b, const char *s) {
    sb_putc(b, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') sb_putc(b, '\\');
        if (*s == '\n') sb_str(b, "\\n");
        else sb_putc(b, *s);
    }
    sb_putc(b, '"');
}

static bool rule_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

/* Copies GBNF text with every rule name prefixed (literals, character
 * classes, repetition counts and comments as they are). */
static void renamed(sbuf *b, const char *g, const char *prefix) {
    while (*g) {
        const char *s = g;
        if (*g == '"' || *g == '[' || *g == '{') { /* to the closing, past escapes */
            char end = *g == '"' ? '"' : *g == '[' ? ']' : '}';
            for (g++; *g && *g != end; g++)
                if (*g == '\\' && g[1]) g++;
            if (*g) g++;
        } else if (*g == '#') {
            while (*g && *g != '\n') g++;
        } else if (rule_char(*g)) {
            sb_str(b, prefix);
            while (rule_char(*g)) g++;
        } else {
            g++;
        }
        sb_add(b, s, (size_t)(g - s));
    }
    if (b->len && b->p[b->len - 1] != '\n') sb_putc(b, '\n');
}

/* The value rule for a parameter: appended rules go to `rules`, its name to `ref`. */
static int value_rule(const cJSON *prop, const char *tool, const char *key, const char *prefix, sbuf *rules,
                      sbuf *ref, llc_err *err) {
    if (toolcall_xml_is_string(prop)) {
        static const char *const loose[] = {"pattern", "format", "minLength", "maxLength"};
        for (size_t i = 0; i < sizeof loose / sizeof *loose; i++)
            if (cJSON_GetObjectItemCaseSensitive(prop, loose[i]))
                return llc_fail(err, LLC_ERR_FORMAT, "tool '%s': parameter '%s': '%s' of a string cannot be "
                                "enforced on raw-text values (tool_choice \"required\")", tool, key, loose[i]);
        const cJSON *en = cJSON_GetObjectItemCaseSensitive(prop, "enum"), *c = cJSON_GetObjectItemCaseSensitive(prop, "const");
        if (!en && !c) {
            sb_str(ref, "xml-text");
            return 0;
        }
        sb_printf(ref, "%sraw", prefix);
        sb_printf(rules, "%sraw ::= ", prefix);
        const cJSON *v;
        int n = 0;
        if (cJSON_IsString(c)) lit(rules, c->valuestring), n++;
        cJSON_ArrayForEach(v, en) {
            if (!cJSON_IsString(v)) continue;
            if (n++) sb_str(rules, " | ");
            lit(rules, v->valuestring);
        }
        if (!n)
            return llc_fail(err, LLC_ERR_FORMAT, "tool '%s': parameter '%s': a string enum without strings",
                            tool, key);
        sb_putc(rules, '\n');
        return 0;
    }
    char *gbnf = NULL;
    llc_err e2;
    int rc = json_schema_to_gbnf(prop, &gbnf, &e2);
    if (rc == LLC_ERR_NOMEM) return llc_fail(err, rc, "out of memory");
    if (rc) return llc_fail(err, LLC_ERR_FORMAT, "tool '%s': parameter '%s': %s (tool_choice \"required\" enforces it)", tool, key,
                            e2.msg);
    renamed(rules, gbnf, prefix);
    free(gbnf);
    sb_printf(ref, "%sroot", prefix);
    return 0;
}

/* pair-T-K ::= the markup of one key with its value. */
static int pair_rule(const toolcall_xml_markup *mk, const char *tool, int t, int k, const char *key,
                     const cJSON *prop, sbuf *rules, llc_err *err) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "v-%d-%d-", t, k);
    sbuf ref = {0};
    int rc = value_rule(prop, tool, key, prefix, rules, &ref, err);
    if (!rc) {
        sb_printf(rules, "pair-%d-%d ::= ", t, k);
        lit(rules, mk->key_open);
        sb_putc(rules, ' ');
        lit(rules, key);
        sb_putc(rules, ' ');
        lit(rules, mk->key_close);
        if (mk->value_open) sb_str(rules, " \"\\n\" "), lit(rules, mk->value_open);
        sb_str(rules, mk->trim_nl ? " \"\\n\" " : " ");
        sb_str(rules, ref.p ? ref.p : "");
        sb_str(rules, mk->trim_nl ? " \"\\n\" " : " ");
        if (mk->value_close) {
            lit(rules, mk->value_close);
        } else { /* the key's own closing tag (MiniMax-M3) */
            char *close = NULL;
            if (asprintf(&close, "%s</%s>", mk->ns ? mk->ns : "", key) < 0) close = NULL;
            lit(rules, close ? close : "");
            if (!close) rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
            free(close);
        }
        sb_str(rules, " \"\\n\"\n");
    }
    sb_free(&ref);
    return rc;
}

static bool is_required(const cJSON *required, const char *key) {
    const cJSON *r;
    cJSON_ArrayForEach(r, required)
        if (cJSON_IsString(r) && strcmp(r->valuestring, key) == 0) return true;
    return false;
}

/* call-T ::= the markup of one call of tool t, and its pairs' rules. */
static int call_rule(const toolcall_xml_markup *mk, const cJSON *tool, int t, sbuf *rules, llc_err *err) {
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name"));
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *required = cJSON_GetObjectItemCaseSensitive(params, "required");
    sbuf call = {0};
    sb_printf(&call, "call-%d ::= ", t);
    if (mk->call_open) lit(&call, mk->call_open), sb_putc(&call, ' ');
    lit(&call, name ? name : "");
    if (mk->name_end) sb_putc(&call, ' '), lit(&call, mk->name_end);
    sb_str(&call, " \"\\n\"");
    int rc = 0, k = 0;
    for (int pass = 0; pass < 2 && !rc; pass++) { /* the required ones, then the optional ones */
        const cJSON *p;
        cJSON_ArrayForEach(p, props) {
            if (is_required(required, p->string) != (pass == 0)) continue;
            if ((rc = pair_rule(mk, name, t, k, p->string, p, rules, err))) break;
            sb_printf(&call, pass == 0 ? " pair-%d-%d" : " ( pair-%d-%d )?", t, k);
            k++;
        }
    }
    if (mk->call_close) sb_putc(&call, ' '), lit(&call, mk->call_close), sb_str(&call, " \"\\n\"");
    sb_putc(&call, '\n');
    sb_add(rules, call.p, call.len);
    sb_free(&call);
    return rc;
}

int srv_xml_tools_grammar(toolcall_format f, const cJSON *tools, char **out, llc_err *err) {
    *out = NULL;
    const toolcall_xml_markup *mk = toolcall_xml_markup_of(f);
    if (!mk) return llc_fail(err, LLC_ERR_RANGE, "'%s' is not an XML tool-call format", toolcall_format_name(f));
    sbuf root = {0}, rules = {0};
    sb_str(&root, "root ::= ");
    lit(&root, mk->open);
    if (mk->call_open) sb_str(&root, " \"\\n\"");
    sb_str(&root, " (");
    int rc = 0, t = 0;
    const cJSON *tool;
    cJSON_ArrayForEach(tool, tools) {
        if ((rc = call_rule(mk, tool, t, &rules, err))) break;
        sb_printf(&root, "%s call-%d", t ? " |" : "", t);
        t++;
    }
    sb_str(&root, " ) ");
    lit(&root, mk->close);
    sb_str(&root, "\nxml-text ::= ( [^<] | \"<\" [^/<] )*\n");
    sb_add(&root, rules.p, rules.len);
    sb_free(&rules);
    if (!rc && root.oom) rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    if (rc) {
        sb_free(&root);
        return rc;
    }
    *out = sb_take(&root);
    return 0;
}
