/* view.h — the terminal side of the chat: the curses main loop that draws the
 * app's state (tab bar, transcript, input box, status line) and turns keys into
 * app actions. Only the UI thread calls it; it never waits on the engine or the
 * disk: poll() wakes it for keys, engine events and a periodic tick. */
#ifndef LLC_UI_VIEW_H
#define LLC_UI_VIEW_H

#include "ui/app.h"

/* Runs until the user quits (Ctrl-Q, /quit) or a termination signal.
 * Returns 0, or negative if the terminal could not be set up (err says why). */
int ui_run(ui_app *a, llc_err *err);

#endif
