/* app_internal.h — what the files of the chat application (ui/app.c,
 * ui/app_models.c) share; no other module includes it. */
#ifndef LLC_UI_APP_INTERNAL_H
#define LLC_UI_APP_INTERNAL_H

#include "ui/app.h"

/* The provider a tab talks to: its own model's, or the default. */
provider *app_tab_prov(const ui_app *a, const conv *c);
/* What a session stores as its model: its own model file, or the default's name. */
const char *app_model_name(const ui_app *a, const conv *c);
/* Refuses a line of input: the notice says why and the view keeps the text in
 * the input box (ui_app_input returns false). */
void app_reject(ui_app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Shows text (malloc'd, taken) under the chat; NULL closes the panel. */
void app_set_panel(ui_app *a, char *text);
/* The file name of a path. */
const char *app_base_name(const char *path);
/* Appends to a growing text. */
void app_cat(char **buf, size_t *len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- other models (app_models.c) ---- */
/* A tab that wants a model of its own (conv.model) gets its provider once open. */
void app_models_attach(ui_app *a, conv *c);
/* Starts opening the first model a tab waits for (one at a time). */
void app_models_load_next(ui_app *a);
/* On each poll: shows the loading progress, and takes the model when it is open. */
void app_models_poll(ui_app *a, double now_ms);
/* The loading thread's wake fd, or -1 when nothing loads. */
int app_models_fd(const ui_app *a);
/* /model [PATH]. */
void app_cmd_model(ui_app *a, conv *c, const char *arg, size_t len);
/* Waits for a model still loading, frees every model opened. */
void app_models_free(ui_app *a);

#endif
