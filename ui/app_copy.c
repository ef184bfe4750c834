/* app_copy.c — /copy (see app_internal.h): the last answer, message N, or a
 * code block of either (numbered as their borders show: #K) into the
 * clipboard text the view sends to the terminal (OSC 52). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui/app_internal.h"
#include "ui/markdown.h"

/* What /copy took goes to the clipboard (the view sends it to the terminal). */
static void clip_set(ui_app *a, char *text, size_t len) {
    free(a->clipboard);
    a->clipboard = text;
    a->clipboard_len = len;
    a->copied_block = 0;
}

/* Code block k (0: the last) of message m (shown as number n, 0: "the last
 * answer") to the clipboard; refused saying how many blocks it has. */
static void copy_block(ui_app *a, const conv_msg *m, long long n, int k) {
    size_t len = 0;
    char *text = md_code_block(m->text, m->len, k, &len);
    if (!text) {
        int have = md_code_blocks(m->text, m->len);
        char which[48] = "the last answer with code";
        if (n) snprintf(which, sizeof which, "message %lld", n);
        if (!have) app_reject(a, "/copy: %s has no code block", which);
        else app_reject(a, "/copy: %s has %d code block%s (#1 to #%d)", which, have, have == 1 ? "" : "s", have);
        return;
    }
    clip_set(a, text, len);
    int shown = k ? k : md_code_blocks(m->text, m->len);
    a->copied_block = shown;
    if (n) ui_app_notice(a, false, "copied code block #%d of message %lld (%zu bytes) to the clipboard", shown, n, len);
    else ui_app_notice(a, false, "copied code block #%d (%zu bytes) to the clipboard", shown, len);
}

/* /copy N [code [K]]: message N of those shown (1: the first), or a code block of it. */
static void copy_message(ui_app *a, conv *c, long long k, int block) {
    int n = conv_n_shown(c);
    if (k > n) {
        app_reject(a, "/copy %lld: this conversation shows %d message%s", k, n, n == 1 ? "" : "s");
        return;
    }
    const conv_msg *m = conv_shown(c, (int)k - 1);
    if (!m->len) {
        app_reject(a, "/copy %lld: that message has no text yet", k);
        return;
    }
    if (block) {
        copy_block(a, m, k, block > 0 ? block : 0);
        return;
    }
    char *text = malloc(m->len + 1);
    if (!text) {
        app_reject(a, "out of memory");
        return;
    }
    memcpy(text, m->text, m->len + 1);
    clip_set(a, text, m->len);
    ui_app_notice(a, false, "copied message %lld (%s, %zu bytes) to the clipboard", k,
                  m->role == DB_ROLE_USER ? "yours" : "an answer", m->len);
}

/* /copy: the last answer shown; /copy code [K]: the last answer with code
 * blocks, its last block or block K. */
static void copy_answer(ui_app *a, conv *c, int block) {
    for (int i = conv_n_shown(c) - 1; i >= 0; i--) {
        conv_msg *m = conv_shown(c, i);
        if (m->role != DB_ROLE_ASSISTANT || !m->len) continue;
        if (block && !md_code_blocks(m->text, m->len)) continue;
        if (block) {
            copy_block(a, m, 0, block > 0 ? block : 0);
            return;
        }
        char *text = malloc(m->len + 1);
        if (!text) break;
        memcpy(text, m->text, m->len + 1);
        clip_set(a, text, m->len);
        ui_app_notice(a, false, "copied the last answer (%zu bytes) to the clipboard", m->len);
        return;
    }
    app_reject(a, block ? "no code block in the answers here" : "no answer to copy yet");
}

void app_cmd_copy(ui_app *a, conv *c, long long message, int block) {
    if (message) copy_message(a, c, message, block);
    else copy_answer(a, c, block);
}
