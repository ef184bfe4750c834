/* srv_note.c — the queue of notes the server leaves for a UI that shows its
 * work on stored sessions live (srv_next_note): a list under a mutex and an
 * eventfd that is readable while notes wait. Pushed by the server thread,
 * taken by the UI thread. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/server/srv_internal.h"

void srv_note_push(srv *s, srv_note_kind kind, int64_t session, int64_t message, int index,
                   const char *text, size_t len) {
    if (s->note_fd < 0) return;
    pthread_mutex_lock(&s->note_mu);
    bool full = s->n_notes >= 65536;
    pthread_mutex_unlock(&s->note_mu);
    if (full && kind == SRV_NOTE_TEXT) return;
    srv_note_node *n = calloc(1, sizeof *n);
    if (!n) return;
    n->note = (srv_note){.kind = kind, .session_id = session, .message_id = message, .index = index};
    if (text && !(n->note.text = strndup(text, len))) {
        free(n);
        return;
    }
    n->note.len = text ? len : 0;
    pthread_mutex_lock(&s->note_mu);
    if (s->note_tail) s->note_tail->next = n;
    else s->note_head = n;
    s->note_tail = n;
    s->n_notes++;
    pthread_mutex_unlock(&s->note_mu);
    uint64_t one = 1;
    ssize_t w = write(s->note_fd, &one, sizeof one);
    (void)w;
}

int srv_notify_fd(const srv *s) { return s->note_fd; }

srv_note *srv_next_note(srv *s) {
    if (s->note_fd < 0) return NULL;
    pthread_mutex_lock(&s->note_mu);
    srv_note_node *n = s->note_head;
    if (n) {
        s->note_head = n->next;
        if (!s->note_head) s->note_tail = NULL;
        s->n_notes--;
    }
    if (!s->note_head) {
        uint64_t v;
        ssize_t r = read(s->note_fd, &v, sizeof v);
        (void)r;
    }
    pthread_mutex_unlock(&s->note_mu);
    return n ? &n->note : NULL; /* note is the node's second member: see srv_note_free */
}

void srv_note_free(srv_note *n) {
    if (!n) return;
    free(n->text);
    free((char *)n - offsetof(srv_note_node, note));
}

