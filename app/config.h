/* config.h — the user's config file, $XDG_CONFIG_HOME/llmchat/config (else
 * ~/.config/llmchat/config): `key = value` lines, '#' comments. Keys: model
 * (path of the default model), chat-template, other-model (may repeat: models
 * the chat's /model list offers). A missing file is no error; a line that
 * cannot be read is, naming the file and line. */
#ifndef LLC_APP_CONFIG_H
#define LLC_APP_CONFIG_H

#include "kernels/common.h"

typedef struct config {
    char *model;          /* NULL when not set */
    char *chat_template;
    char **other_models;  /* the other-model lines, in order (n_other_models of them) */
    int n_other_models;
} config;

int config_load(config *out, llc_err *err);
void config_free(config *c);

#endif
