/* srv.h — the local socket server for editors, scripts and other programs.
 *
 * srv_start() opens a Unix domain socket (and, when asked, a TCP port) and
 * starts a server thread that shares the caller's engine: every connection
 * speaks either llmchat's own protocol (newline-delimited JSON, see
 * docs/PROTOCOL.md) or HTTP/1.1 (OpenAI-compatible and llama-server-compatible
 * endpoints, served by libmicrohttpd). The two are told apart by the first byte
 * a client sends. Stored sessions are read and written through the server's own
 * database connection, with the same semantics as the chat UI.
 *
 * Threads: one server thread does all of it. It polls the listening sockets, its
 * NDJSON clients, their engine clients' wake fds, libmicrohttpd's epoll fd (HTTP
 * runs in MHD's external-poll mode inside this loop: an HTTP request waiting for
 * the engine is a suspended connection, resumed when its engine client's fd
 * wakes) and a wake fd of its own; it never blocks on a client (non-blocking
 * sockets, capped output). Each listener has its own connection limit, so a
 * flood on TCP never takes the Unix socket's room; at the limit the oldest
 * connection that has not sent a complete request yet makes room. A request
 * head must arrive within request_timeout_ms of the connection (or of the
 * previous answer on a kept-alive one).
 * srv_start ignores SIGPIPE for the whole process.
 *
 * Stop the server (srv_stop) before destroying the engine: srv_stop cancels
 * every request still streaming, lets each client receive its `cancelled`
 * finish (for at most a few seconds), then closes everything and removes the
 * socket file. */
#ifndef LLC_APP_SRV_H
#define LLC_APP_SRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "app/llm.h"
#include "engine/template/chat.h"
#include "engine/sched/engine.h"

typedef struct srv srv;

typedef struct srv_config {
    const char *socket_path; /* NULL: srv_default_socket_path() */
    const char *listen;      /* "HOST:PORT" for TCP (port 0: any free port), NULL: none */
    const char *api_key;     /* required on TCP when set; mandatory for a non-loopback HOST */
    const char *db_path;     /* NULL: db_default_path(); "" : no database (sessions.* fail) */
    const char *model_name;  /* shown by `models` and stored with new sessions;
                                NULL: the model file's name without ".gguf" */
    int max_clients;         /* open connections per listener (Unix socket, TCP) at most
                                (default 256) */
    int request_timeout_ms;  /* a request head (HTTP) or first byte must arrive within
                                this (default 5000) */
    size_t max_line;         /* longest NDJSON request line (default 1 MiB) */
    size_t max_body;         /* largest HTTP request body (default 8 MiB) */
    size_t max_outbuf;       /* bytes queued for one slow NDJSON client before it is
                                dropped (default 4 MiB) */
    bool notify;             /* queue srv_note's for a UI (srv_next_note) */
    const char *model_path;  /* shown by GET /props (copied; NULL: "") */
    const char *cors_origins; /* TCP: the browser origins whose pages may read the answers,
                                comma-separated (copied); NULL or "*": any (as llama-server);
                                "none": no CORS headers at all */
    bool no_metrics, no_slots; /* GET /metrics, GET /slots answer 501 */
    int stall_ms;            /* an HTTP stream whose client reads nothing of it for this long
                                is cancelled (default 30000) */
    bool no_reasoning;       /* a thinking model's reasoning stays in the answer's text
                                (--reasoning-format none) */
} srv_config;

/* The default socket path: $XDG_RUNTIME_DIR/llmchat/llmchat.sock, or
 * /tmp/llmchat-$UID/llmchat.sock when XDG_RUNTIME_DIR is unset or relative.
 * Creates nothing. LLC_ERR_RANGE when it does not fit in n bytes or in a
 * sockaddr_un. */
int srv_default_socket_path(char *buf, size_t n, llc_err *err);

/* Opens the socket(s) and starts the server thread on engine e, model l (its
 * tokenizer and hyper-parameters; l and e must outlive the server) and chat
 * template t. A socket file left by a dead process is replaced; a live one is
 * never taken: LLC_ERR_IO with "another llmchat is serving PATH". A database
 * that cannot be opened is not fatal: sessions.* and chat with a session then
 * answer with an error saying why. On failure nothing is left open. */
int srv_start(engine *e, const llm *l, chat_tmpl t, const srv_config *cfg, srv **out,
              llc_err *err);

/* Ends every stream with a `cancelled` finish, closes all connections, removes
 * the socket file and frees s. NULL is a no-op. Call before engine_destroy. */
void srv_stop(srv *s);

/* The Unix socket's path. */
const char *srv_socket_path(const srv *s);
/* The TCP port actually listened on (useful with port 0), or 0 without --listen. */
int srv_tcp_port(const srv *s);
/* Why sessions are unavailable (the database could not be opened), or "" when
 * they are. */
const char *srv_db_error(const srv *s);
/* A model's display name from its path: "dir/name.gguf" -> "name". */
void srv_display_name(const char *model_path, char *out, size_t n);

/* ---- notes for a UI that shows the server's work on stored sessions live ---- */

typedef enum srv_note_kind {
    SRV_NOTE_SESSION, /* session_id was created, deleted, or got a new user message
                         and answer(s): reload it from the database */
    SRV_NOTE_TEXT,    /* text streamed into answer message_id (index: which of the
                         parallel answers) */
    SRV_NOTE_DONE,    /* answer message_id finished and is stored */
} srv_note_kind;

typedef struct srv_note {
    srv_note_kind kind;
    int64_t session_id;
    int64_t message_id; /* TEXT, DONE: the answer's id; 0 for SESSION */
    int index;
    char *text;         /* TEXT: NUL-terminated piece (len bytes); else NULL */
    size_t len;
} srv_note;

/* Readable (eventfd) while notes wait; -1 when cfg.notify was not set. */
int srv_notify_fd(const srv *s);
/* The next note or NULL; free it with srv_note_free. At most 65536 notes wait:
 * beyond that TEXT notes are dropped (SESSION and DONE are kept). */
srv_note *srv_next_note(srv *s);
void srv_note_free(srv_note *n);

#endif
