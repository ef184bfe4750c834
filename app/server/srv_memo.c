/* srv_memo.c — the Responses API's memory of recent answers (previous_response_id):
 * a response id and the conversation it ended (JSON text), the least recently
 * used dropped beyond a count and a byte budget. Read on the workers that read
 * requests and written on the server thread, so it locks itself. A linear list:
 * it holds at most SRV_MEMO_ENTRIES. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "app/server/srv_internal.h"

typedef struct memo_entry {
    struct memo_entry *prev, *next; /* most recently used first */
    char id[64];
    char *text;
    size_t len;
} memo_entry;

struct srv_memo {
    pthread_mutex_t mu;
    memo_entry *head, *tail;
    int n;
    size_t bytes;
};

srv_memo *srv_memo_new(void) {
    srv_memo *m = calloc(1, sizeof *m);
    if (m && pthread_mutex_init(&m->mu, NULL)) {
        free(m);
        return NULL;
    }
    return m;
}

static void unlink_entry(srv_memo *m, memo_entry *e) {
    if (e->prev) e->prev->next = e->next;
    else m->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else m->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(srv_memo *m, memo_entry *e) {
    e->next = m->head;
    if (m->head) m->head->prev = e;
    m->head = e;
    if (!m->tail) m->tail = e;
}

static void drop(srv_memo *m, memo_entry *e) {
    unlink_entry(m, e);
    m->n--;
    m->bytes -= e->len;
    free(e->text);
    free(e);
}

void srv_memo_free(srv_memo *m) {
    if (!m) return;
    while (m->head) drop(m, m->head);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

bool srv_memo_put(srv_memo *m, const char *id, const char *text) {
    size_t len = strlen(text);
    if (!m || len > SRV_MEMO_BYTES || strlen(id) >= sizeof ((memo_entry *)0)->id) return false;
    memo_entry *e = calloc(1, sizeof *e);
    if (!e || !(e->text = strdup(text))) {
        free(e);
        return false;
    }
    strcpy(e->id, id);
    e->len = len;
    pthread_mutex_lock(&m->mu);
    push_front(m, e);
    m->n++;
    m->bytes += len;
    while (m->n > SRV_MEMO_ENTRIES || m->bytes > SRV_MEMO_BYTES) drop(m, m->tail);
    pthread_mutex_unlock(&m->mu);
    return true;
}

char *srv_memo_get(srv_memo *m, const char *id) {
    char *copy = NULL;
    if (!m) return NULL;
    pthread_mutex_lock(&m->mu);
    for (memo_entry *e = m->head; e; e = e->next) {
        if (strcmp(e->id, id)) continue;
        unlink_entry(m, e); /* now the most recently used */
        push_front(m, e);
        copy = strdup(e->text);
        break;
    }
    pthread_mutex_unlock(&m->mu);
    return copy;
}
