/* app.h — the chat application's state and actions, apart from the terminal:
 * the open tabs (conversations), the provider every tab generates through
 * (the local engine or a remote server, one interface: ui/provider.h), the
 * database connection (which may be missing or failing: chatting goes on in
 * memory and saving is retried), commands, and the provider's events.
 * view.c draws this state and turns keys into these calls; tests can drive it
 * without a terminal. Only the UI thread touches it. */
#ifndef LLC_UI_APP_H
#define LLC_UI_APP_H

#include "storage/db.h"
#include "storage/conv.h"
#include "ui/provider.h"

typedef struct ui_app ui_app;

/* A named system prompt (the config file's `role NAME = TEXT`): /role NAME applies it. */
typedef struct ui_role {
    const char *name, *prompt;
} ui_role;

typedef struct ui_app_config {
    provider *prov;          /* where answers come from (the local engine or a server); the caller's */
    const char *model_path;  /* the file of prov's model ("" when it has none) */
    /* /model PATH: opens another model for a tab, on a thread of its own (NULL:
     * not offered). The app frees what it returns. */
    int (*open_model)(void *ctx, const char *path, provider **out, llc_err *err);
    void *open_ctx;
    /* models the config file names (other-model): /model lists them too */
    char *const *config_models;
    int n_config_models;
    const char *db_path;     /* NULL: no database (memory only) */
    bool no_mouse;           /* the config's `mouse = off`: the terminal keeps every click (view.c) */
    /* the config file's defaults for a new tab (restored sessions keep their own) */
    bool has_temperature;
    float temperature;
    int max_tokens;          /* 0: not set */
    const char *system;      /* the system prompt (NULL: none) */
    const ui_role *roles;    /* /role NAME (n_roles of them; the caller's) */
    int n_roles;
    const char *config_path; /* the file they came from, for /role's list ("" or NULL: none) */
    /* another source of work for the main loop (the socket server's notes):
     * while extra_fd is readable, on_extra(extra_ctx, app) is called */
    int extra_fd;            /* -1 or 0 when none */
    void (*on_extra)(void *ctx, ui_app *a);
    void *extra_ctx;
} ui_app_config;

typedef struct ui_model {
    char *path;
    provider *prov;
} ui_model;

struct ui_app {
    ui_app_config cfg;
    ui_model *models;        /* models opened by /model (or for restored sessions) */
    int n_models;
    struct ui_loader *loader; /* the model being opened in the background, or NULL */
    char **picks;            /* the model files numbered by the last /model ("" : the default) */
    char **pick_names;       /* [n_picks]: a found model's readable name (ui/model_find.h), or NULL */
    int n_picks;
    db *db;                  /* NULL when it could not be opened */
    char db_error[320];      /* why (shown until it works) */
    conv **tabs;
    int n_tabs, cur;
    unsigned tabs_gen;       /* counts tabs opened, closed or reloaded (the view's input box follows) */
    char notice[320];        /* one line for the status area; "" none */
    bool notice_error;
    char *warnings;          /* start-up warnings, one a line, shown until Esc (NULL: none) */
    char *panel;             /* help / sessions / search / stats text shown under the chat */
    int64_t *listed;         /* sessions numbered in the last /sessions or /search */
    int64_t *listed_msgs;    /* /search: the message each matched in (NULL after /sessions) */
    int n_listed;
    bool listed_all;         /* the last /sessions had --all (a change lists them again so) */
    int64_t delete_confirm;  /* a session whose /delete was asked once (asking again deletes it) */
    unsigned panel_gen;      /* counts panel changes (a command that shows none closes it) */
    int lock_fd;             /* the UI lock next to the database (-1: none): one UI per database */
    char status[320];        /* the provider's status line */
    double last_retry_ms;
    bool quit;
    bool quit_confirm;       /* Ctrl-Q was pressed with messages not saved: again quits */
    char recovery[512];      /* the file unsaved tabs were written to at quit ("" : none) */
    bool changed;            /* something to redraw */
    char *edit_text;         /* /edit: text the view puts into the input box */
    bool rejected;           /* the last input was refused */
    char **history;          /* inputs sent, oldest first (n_history of them) */
    int n_history;
    char *clipboard;         /* /copy: text the view sends to the terminal's clipboard */
    size_t clipboard_len;
    int copied_block;        /* the number (#K) of the code block the last /copy took (0: not a block) */
    conv *close_confirm;     /* an unsaved tab whose close was asked once (ask again to lose it) */
};

/* Opens the database (a failure is reported in db_error, never fatal), restores
 * the tabs that were open last time, or opens one new tab. */
int ui_app_create(const ui_app_config *cfg, ui_app **out, llc_err *err);
/* Cancels what runs, stores everything it can and the open tabs, frees. */
void ui_app_free(ui_app *a);
/* Ctrl-Q or /quit: quits when everything is saved; otherwise the first time
 * asks (a notice says what is not saved and why), the second quits writing the
 * unsaved tabs to a Markdown file (a->recovery says where). */
void ui_app_quit(ui_app *a);

conv *ui_app_tab(const ui_app *a); /* the current tab */
/* A line of input: a command or a message to send (while the tab's answer
 * streams, a message waits for it to end: conv.queued). Returns false when the
 * input was refused (a bad command, a message too long for the context, ...):
 * the notice says why and the view keeps the text in the input box. */
bool ui_app_input(ui_app *a, const char *text, size_t len);
void ui_app_new_tab(ui_app *a);
void ui_app_close_tab(ui_app *a);
void ui_app_switch(ui_app *a, int index); /* clamps; wraps for -1 / n_tabs */
/* Ctrl-C: stops the current tab's answer; false when none is coming. */
bool ui_app_cancel(ui_app *a);
/* Esc: closes the panel, the notice and the warnings, and leaves /edit. Returns true when an
 * edit was left (the view then empties the input box). */
bool ui_app_escape(ui_app *a);
/* Drains the provider's events into the tabs. */
void ui_app_poll_events(ui_app *a, double now_ms);
/* Periodic work: streaming saves, retrying failed saves, metrics. */
void ui_app_tick(ui_app *a, double now_ms);
/* The fds to poll() for (providers' events, a model loading): up to max into
 * fds; returns how many. */
int ui_app_fds(const ui_app *a, int *fds, int max);
/* Another program (the socket server) changed stored session id: a tab showing
 * it and not generating itself reloads it from the database. */
void ui_app_session_changed(ui_app *a, int64_t session_id);
/* Text another program streams into answer message_id of session_id: shown
 * live in an open tab (the other program stores it). */
void ui_app_session_text(ui_app *a, int64_t session_id, int64_t message_id, const char *text,
                         size_t len);
/* The input history kept in the database, per database (oldest first), for
 * the view's Up/Down; adding one stores it (the last UI_HISTORY_MAX are kept). */
#define UI_HISTORY_MAX 200
int ui_app_history_count(const ui_app *a);
const char *ui_app_history_get(const ui_app *a, int i);
void ui_app_history_add(ui_app *a, const char *text);
/* Sets the one-line notice. */
void ui_app_notice(ui_app *a, bool error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Adds a start-up warning (the database, a second chat, the GPU, the chat
 * template, the socket): each keeps a line of its own above the input until
 * Esc dismisses them, whatever notices come after. */
void ui_app_warn(ui_app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
