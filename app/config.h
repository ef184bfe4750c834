/* config.h — the user's config file, $XDG_CONFIG_HOME/llmchat/config (else
 * ~/.config/llmchat/config): `key = value` lines, '#' comments. Keys: model
 * (path of the default model), chat-template, other-model (may repeat: models
 * the chat's /model list offers); the chat's defaults for a new tab:
 * temperature, max-tokens, system (the system prompt; "\n" is a line break);
 * `role NAME = TEXT` (may repeat: named system prompts, /role NAME applies
 * one); mouse (on or off). A missing file is no error; a line that cannot be
 * read, or a value out of range, is, naming the file and line. */
#ifndef LLC_APP_CONFIG_H
#define LLC_APP_CONFIG_H

#include <stdbool.h>

#include "kernels/common.h"

typedef struct config_role {
    char *name, *prompt;
} config_role;

typedef struct config {
    char *model;          /* NULL when not set */
    char *chat_template;
    char **other_models;  /* the other-model lines, in order (n_other_models of them) */
    int n_other_models;
    bool has_temperature; /* temperature = T given */
    float temperature;
    int max_tokens;       /* 0: not set */
    char *system;         /* NULL: not set */
    config_role *roles;   /* in the file's order; a name given again replaces the earlier text */
    int n_roles;
    bool no_mouse;        /* mouse = off */
    char path[1024];      /* the file read ("" : none) */
} config;

int config_load(config *out, llc_err *err);
/* The same from a given file (tests). */
int config_load_file(config *out, const char *path, llc_err *err);
void config_free(config *c);

#endif
