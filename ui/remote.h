/* remote.h — an OpenAI-compatible server as the chat's provider (see
 * provider.h): vLLM, SGLang, llama-server, Ollama, a hosted API, or another
 * llmchat's `serve`. Each answer is one POST to /v1/chat/completions with
 * "stream": true, read as Server-Sent Events through libcurl on a thread of
 * its own; cancelling closes that stream. Failures end the answer with an
 * error that says what happened: the HTTP status and the server's message
 * (401, 429, ...), a connection refused, or a stream cut off mid-answer (the
 * text that came before stays, marked). */
#ifndef LLC_UI_REMOTE_H
#define LLC_UI_REMOTE_H

#include <stddef.h>

#include "ui/provider.h"

typedef struct remote_config {
    const char *url;     /* base URL ("http://host:8000", ".../v1") or the full
                            .../chat/completions endpoint */
    const char *model;   /* NULL: the first model the server lists at /v1/models */
    const char *api_key; /* NULL: no Authorization header */
    int connect_timeout_s; /* 0: 10 s */
} remote_config;

int remote_create(const remote_config *cfg, provider **out, llc_err *err);

/* The chat completions endpoint and the models list for a base URL.
 * LLC_ERR_FORMAT when url is not an http(s) URL; LLC_ERR_RANGE when it does not fit. */
int remote_endpoints(const char *url, char *chat, size_t chat_n, char *models, size_t models_n,
                     llc_err *err);

#endif
