/* provider.c — the events every provider sends (see provider.h). */
#include "ui/provider.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

prov_event *prov_event_text(int64_t request_id, int seq_index, const char *text, size_t len) {
    prov_event *ev = calloc(1, sizeof *ev);
    if (!ev) return NULL;
    ev->text = malloc(len + 1);
    if (!ev->text) {
        free(ev);
        return NULL;
    }
    if (len) memcpy(ev->text, text, len);
    ev->text[len] = 0;
    ev->text_len = len;
    ev->kind = PROV_TEXT;
    ev->request_id = request_id;
    ev->seq_index = seq_index;
    return ev;
}

prov_event *prov_event_reasoning(int64_t request_id, int seq_index, const char *text, size_t len) {
    prov_event *ev = prov_event_text(request_id, seq_index, text, len);
    if (ev) ev->kind = PROV_REASONING;
    return ev;
}

prov_event *prov_event_done(int64_t request_id, int seq_index, int state, const char *finish,
                            const db_usage *usage, const char *message) {
    prov_event *ev = calloc(1, sizeof *ev);
    if (!ev) return NULL;
    ev->kind = PROV_DONE;
    ev->request_id = request_id;
    ev->seq_index = seq_index;
    ev->state = state;
    snprintf(ev->finish, sizeof ev->finish, "%s", finish ? finish : "");
    if (usage) ev->usage = *usage;
    snprintf(ev->message, sizeof ev->message, "%s", message ? message : "");
    return ev;
}

void prov_event_free(prov_event *ev) {
    if (!ev) return;
    free(ev->text);
    free(ev);
}
