/* app_internal.h — what the app*.c files of the chat application share (the
 * tabs, models, sessions, branches, copying and roles of one ui_app). Private to ui/ (make
 * check-layers). The calls go one way: app.c calls every file; the command
 * files call app_tabs.c and each other downwards (sessions -> branch, files ->
 * models); app_tabs.c calls none of them (scripts/check-calls). */
#ifndef LLC_UI_APP_INTERNAL_H
#define LLC_UI_APP_INTERNAL_H

#include "kernels/sbuf.h"
#include "ui/app.h"

/* ---- the tabs and the shared helpers (app_tabs.c): app.c and every command
 * file call these, they call none of them back ---- */
/* The provider a tab talks to: its own model's, or the default. */
provider *app_tab_prov(const ui_app *a, const conv *c);
/* What a session stores as its model: its own model file, or the default's name. */
const char *app_model_name(const ui_app *a, const conv *c);
/* Refuses a line of input: the notice says why and the view keeps the text in
 * the input box (ui_app_input returns false). */
void app_reject(ui_app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Shows text (malloc'd, taken) under the chat; NULL closes the panel. */
void app_set_panel(ui_app *a, char *text);
/* Shows a panel's text built in an sbuf (taken: the buffer is left empty); when
 * an append ran out of memory, the command is refused saying so instead of
 * showing a part of the text. */
void app_show_panel(ui_app *a, sbuf *text);
/* Adds a tab and makes it current. */
int app_add_tab(ui_app *a, conv *c);
/* A new tab's temperature, max_tokens and system prompt from the config: 0 or LLC_ERR_NOMEM. */
int app_tab_defaults(const ui_app *a, conv *c);
/* Stores which sessions are open in tabs, and the current one. */
void app_save_tabs(ui_app *a);
/* Saves a tab; a failure becomes the notice (the tab keeps everything). */
void app_save_conv(ui_app *a, conv *c, bool force, double now);
/* The tab's system prompt becomes text[0..len), saved with its session; false
 * (and the command refused) when out of memory. Shared by /system and /role. */
bool app_set_system(ui_app *a, conv *c, const char *text, size_t len);
/* Removes tab i without saving it (its session was deleted). */
void app_drop_tab(ui_app *a, int i);

/* ---- files (app_files.c) ---- */
/* A path typed in a command as the full path a shell would make of it (~ and
 * ~user expanded, a relative one under the current directory) into out; -1
 * with the reason in out when it cannot. */
int app_full_path(const char *arg, size_t len, char *out, size_t n);
/* /file PATH: a text file into the input box as a fenced block (a missing,
 * binary or too big file is refused, saying which). */
void app_cmd_file(ui_app *a, const char *arg, size_t len);

/* ---- /copy (app_copy.c) ---- */
/* /copy [N] [code [K]]: message N (0: the last answer), or (block -1) its last
 * code block, or (block K) code block K. */
void app_cmd_copy(ui_app *a, conv *c, long long message, int block);

/* ---- the config's roles (app_roles.c) ---- */
/* /role NAME: the role's text becomes the tab's system prompt; alone: the list. */
void app_cmd_role(ui_app *a, conv *c, const char *name, size_t len);
/* /help, F1: the keys and commands, then the config's roles. */
void app_cmd_help(ui_app *a);

/* ---- sessions (app_sessions.c): /sessions, /open, /search, /archive, /delete, /export ---- */
void app_cmd_sessions(ui_app *a, bool all);
void app_cmd_search(ui_app *a, const char *q, size_t qlen);
void app_cmd_open(ui_app *a, long long k);
void app_cmd_archive(ui_app *a, long long k, bool archive);
/* pending: the session whose deletion was asked by the input before (0: none). */
void app_cmd_delete(ui_app *a, long long k, int64_t pending);
void app_cmd_export(ui_app *a, conv *c, const char *arg, size_t len);

/* ---- branches (app_branch.c): /edit, /branch, /alt, versions of a message ---- */
void app_cmd_edit(ui_app *a, conv *c);
void app_cmd_branch(ui_app *a, conv *c);
/* /branch next|prev (dir +1 / -1): the other versions of the user's message. */
void app_cmd_versions(ui_app *a, conv *c, int dir);
void app_cmd_alt(ui_app *a, conv *c, long long k);
/* Counts the versions of each of the user's messages on the tab's path. */
void app_count_versions(ui_app *a, conv *c);
/* A session loaded from the database: its model fixed up for this app (the
 * default model's name means the default) and its message versions counted. */
void app_loaded_conv(ui_app *a, conv *c);

/* ---- other models (app_models.c) ---- */
/* The file name of a path. */
const char *app_base_name(const char *path);
/* A tab that wants a model of its own (conv.model) gets its provider once open. */
void app_models_attach(ui_app *a, conv *c);
/* Starts opening the first model a tab waits for (one at a time). */
void app_models_load_next(ui_app *a);
/* On each poll: shows the loading progress, and takes the model when it is open. */
void app_models_poll(ui_app *a, double now_ms);
/* The loading thread's wake fd, or -1 when nothing loads. */
int app_models_fd(const ui_app *a);
/* /model [PATH]; /model N (pick > 0): entry N of the list the last /model showed. */
void app_cmd_model(ui_app *a, conv *c, const char *arg, size_t len, long long pick);
/* Waits for a model still loading, frees every model opened. */
void app_models_free(ui_app *a);

#endif
