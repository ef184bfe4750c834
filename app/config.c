/* config.c — reading the user's config file (see config.h). */
#include "app/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

/* A copy of val with "\n" as a line break and "\\" as a backslash. */
static char *unescape(const char *val) {
    char *out = malloc(strlen(val) + 1), *o = out;
    if (!out) return NULL;
    for (const char *p = val; *p; p++) {
        if (p[0] == '\\' && p[1] == 'n') *o++ = '\n', p++;
        else if (p[0] == '\\' && p[1] == '\\') *o++ = '\\', p++;
        else *o++ = *p;
    }
    *o = 0;
    return out;
}

static bool role_name_ok(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' && *s != '.') return false;
    return true;
}

/* role NAME = TEXT: a new role, or new text for one named before. */
static int add_role(config *c, const char *name, const char *val) {
    char *prompt = unescape(val);
    if (!prompt) return LLC_ERR_NOMEM;
    for (int i = 0; i < c->n_roles; i++) {
        if (strcmp(c->roles[i].name, name)) continue;
        free(c->roles[i].prompt);
        c->roles[i].prompt = prompt;
        return 0;
    }
    config_role *r = realloc(c->roles, (size_t)(c->n_roles + 1) * sizeof *r);
    char *n = strdup(name);
    if (r) c->roles = r;
    if (!r || !n) {
        free(prompt);
        free(n);
        return LLC_ERR_NOMEM;
    }
    r[c->n_roles++] = (config_role){n, prompt};
    return 0;
}

/* One `key = value` line; a message into why (with the key) when it is refused. */
static int config_line(config *c, const char *key, const char *val, char *why, size_t n) {
    char *end;
    if (!strcmp(key, "other-model")) { /* one more for /model's list */
        char **m = realloc(c->other_models, (size_t)(c->n_other_models + 1) * sizeof *m);
        if (m) c->other_models = m;
        if (!m || !(m[c->n_other_models] = strdup(val))) return LLC_ERR_NOMEM;
        c->n_other_models++;
        return 0;
    }
    if (!strncmp(key, "role", 4) && isspace((unsigned char)key[4])) {
        const char *name = key + 5;
        while (isspace((unsigned char)*name)) name++;
        if (!role_name_ok(name)) {
            snprintf(why, n, "'role NAME = TEXT': a role's name is letters, digits, '-', '_' or '.'");
            return LLC_ERR_FORMAT;
        }
        return add_role(c, name, val);
    }
    if (!strcmp(key, "temperature")) {
        errno = 0;
        double t = strtod(val, &end);
        if (!*val || *end || errno || !isfinite(t) || t < 0 || t > 5) {
            snprintf(why, n, "temperature '%s': a number from 0 to 5", val);
            return LLC_ERR_FORMAT;
        }
        c->has_temperature = true;
        c->temperature = (float)t;
        return 0;
    }
    if (!strcmp(key, "max-tokens")) {
        errno = 0;
        long v = strtol(val, &end, 10);
        if (!*val || *end || errno || v < 1 || v > 1000000) {
            snprintf(why, n, "max-tokens '%s': a whole number from 1 to 1000000", val);
            return LLC_ERR_FORMAT;
        }
        c->max_tokens = (int)v;
        return 0;
    }
    if (!strcmp(key, "mouse")) {
        if (strcmp(val, "on") && strcmp(val, "off")) {
            snprintf(why, n, "mouse '%s': on or off", val);
            return LLC_ERR_FORMAT;
        }
        c->no_mouse = !strcmp(val, "off");
        return 0;
    }
    char **dst = !strcmp(key, "model")           ? &c->model
                 : !strcmp(key, "chat-template") ? &c->chat_template
                 : !strcmp(key, "system")        ? &c->system
                                                 : NULL;
    if (!dst) {
        snprintf(why, n,
                 "unknown key '%s' (model, chat-template, other-model, temperature, max-tokens, system, "
                 "role NAME, mouse)",
                 key);
        return LLC_ERR_FORMAT;
    }
    free(*dst);
    *dst = dst == &c->system ? unescape(val) : strdup(val);
    return *dst ? 0 : LLC_ERR_NOMEM;
}

int config_load_file(config *out, const char *path, llc_err *err) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT ? 0 : llc_fail(err, LLC_ERR_IO, "%s: %s", path, strerror(errno));
    snprintf(out->path, sizeof out->path, "%s", path);
    char line[8192];
    int n = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        n++;
        char *s = trim(line);
        if (!*s || *s == '#') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = llc_fail(err, LLC_ERR_FORMAT, "%s:%d: expected 'key = value'", path, n);
            break;
        }
        *eq = 0;
        char why[300] = "";
        int r = config_line(out, trim(s), trim(eq + 1), why, sizeof why);
        if (r == LLC_ERR_NOMEM) rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
        else if (r) rc = llc_fail(err, LLC_ERR_FORMAT, "%s:%d: %s", path, n, why);
    }
    fclose(f);
    if (rc) config_free(out);
    return rc;
}

int config_load(config *out, llc_err *err) {
    memset(out, 0, sizeof *out);
    char path[1024];
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') snprintf(path, sizeof path, "%s/llmchat/config", xdg);
    else if (home && *home) snprintf(path, sizeof path, "%s/.config/llmchat/config", home);
    else return 0;
    return config_load_file(out, path, err);
}

void config_free(config *c) {
    free(c->model);
    free(c->chat_template);
    free(c->system);
    for (int i = 0; i < c->n_other_models; i++) free(c->other_models[i]);
    free(c->other_models);
    for (int i = 0; i < c->n_roles; i++) free(c->roles[i].name), free(c->roles[i].prompt);
    free(c->roles);
    memset(c, 0, sizeof *c);
}
