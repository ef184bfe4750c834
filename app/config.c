/* config.c — reading the user's config file (see config.h). */
#include "app/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

int config_load(config *out, llc_err *err) {
    memset(out, 0, sizeof *out);
    char path[1024];
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') snprintf(path, sizeof path, "%s/llmchat/config", xdg);
    else if (home && *home) snprintf(path, sizeof path, "%s/.config/llmchat/config", home);
    else return 0;
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT ? 0 : llc_fail(err, LLC_ERR_IO, "%s: %s", path, strerror(errno));
    char line[2048];
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
        char *key = trim(s), *val = trim(eq + 1);
        if (!strcmp(key, "other-model")) { /* one more for /model's list */
            char **m = realloc(out->other_models, (size_t)(out->n_other_models + 1) * sizeof *m);
            if (m) out->other_models = m;
            if (!m || !(m[out->n_other_models] = strdup(val))) rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
            else out->n_other_models++;
            continue;
        }
        char **dst = !strcmp(key, "model") ? &out->model
                     : !strcmp(key, "chat-template") ? &out->chat_template : NULL;
        if (!dst) {
            rc = llc_fail(err, LLC_ERR_FORMAT, "%s:%d: unknown key '%s' (model, chat-template, other-model)", path, n, key);
            break;
        }
        free(*dst);
        if (!(*dst = strdup(val))) rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    fclose(f);
    if (rc) config_free(out);
    return rc;
}

void config_free(config *c) {
    free(c->model);
    free(c->chat_template);
    for (int i = 0; i < c->n_other_models; i++) free(c->other_models[i]);
    free(c->other_models);
    memset(c, 0, sizeof *c);
}
