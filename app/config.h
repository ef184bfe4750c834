/* config.h — the user's config file, $XDG_CONFIG_HOME/llmchat/config (else
 * ~/.config/llmchat/config): `key = value` lines, '#' comments. Keys: model
 * (path of the default model), chat-template. A missing file is no error; a
 * line that cannot be read is, naming the file and line. */
#ifndef LLC_APP_CONFIG_H
#define LLC_APP_CONFIG_H

#include "kernels/common.h"

typedef struct config {
    char *model;          /* NULL when not set */
    char *chat_template;
} config;

int config_load(config *out, llc_err *err);
void config_free(config *c);

#endif
