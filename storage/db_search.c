/* db_search.c — full-text search over message content and reasoning (FTS5,
 * one column each) with user input taken as plain words, and the Markdown
 * export of a conversation path. */
#include "storage/db_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void db_hits_free(db_hit *arr, int n) {
    if (!arr) return;
    for (int i = 0; i < n; i++) {
        free(arr[i].title);
        free(arr[i].snippet);
    }
    free(arr);
}

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Turns plain user text into an FTS5 expression: each whitespace-separated word
 * becomes an FTS5 string ("..." with " doubled), so no character of the input is
 * FTS5 syntax; a word ending in * keeps it outside the quotes as a prefix query.
 * Returns a malloc'ed string, "" when there are no words; NULL on OOM. */
static char *fts_expr(const char *q) {
    size_t n = strlen(q);
    char *out = malloc(n * 2 + 4 * (n / 2 + 1) + 1); /* worst case: every byte a " */
    if (!out) return NULL;
    size_t o = 0;
    const char *p = q;
    while (*p) {
        while (*p && is_space(*p)) p++;
        const char *w = p;
        while (*p && !is_space(*p)) p++;
        const char *e = p;
        bool prefix = false;
        while (e > w && e[-1] == '*') {
            e--;
            prefix = true;
        }
        if (e == w) continue;
        if (o) out[o++] = ' ';
        out[o++] = '"';
        for (const char *c = w; c < e; c++) {
            if (*c == '"') out[o++] = '"';
            out[o++] = *c;
        }
        out[o++] = '"';
        if (prefix) out[o++] = '*';
    }
    out[o] = 0;
    return out;
}

/* A snippet of each column, matches between \x02 and \x03 (control bytes
 * that text hardly ever holds: a column whose snippet has one is where words
 * matched); they become "[" "]" once the column is chosen. */
static const char SQL_SEARCH[] =
    "SELECT m.session_id, m.id, m.role, s.title,"
    "  snippet(messages_fts, 0, char(2), char(3), '...', 16),"
    "  snippet(messages_fts, 1, char(2), char(3), '...', 16)"
    " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
    " JOIN sessions s ON s.id = m.session_id"
    " WHERE messages_fts MATCH ?1 ORDER BY rank LIMIT ?2";

int db_search(db *d, const char *query, int limit, db_hit **out, int *n, llc_err *err) {
    *out = NULL;
    *n = 0;
    const char *what = "searching";
    char *expr = fts_expr(query ? query : "");
    if (!expr) return dbi_fail(d, err, LLC_ERR_NOMEM, "out of memory (while %s)", what);
    if (!*expr) {
        free(expr);
        return 0;
    }
    sqlite3_stmt *st = dbi_stmt(d, SQL_SEARCH, what, err);
    if (!st) {
        free(expr);
        return d->last_code;
    }
    sqlite3_bind_text(st, 1, expr, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, limit > 0 ? limit : 50);
    db_hit *arr = NULL;
    int cnt = 0, cap = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            int ncap = cap ? cap * 2 : 16;
            db_hit *na = realloc(arr, (size_t)ncap * sizeof *na);
            if (!na) {
                rc = dbi_fail(d, err, LLC_ERR_NOMEM, "out of memory (while %s)", what);
                goto done;
            }
            arr = na;
            cap = ncap;
        }
        db_hit *h = &arr[cnt++];
        h->session_id = sqlite3_column_int64(st, 0);
        h->message_id = sqlite3_column_int64(st, 1);
        h->role = sqlite3_column_int(st, 2);
        h->title = dbi_col_dup(st, 3, NULL);
        const char *in_text = (const char *)sqlite3_column_text(st, 4);
        h->in_reasoning = !(in_text && strchr(in_text, 2)); /* the words matched only in the reasoning */
        h->snippet = dbi_col_dup(st, h->in_reasoning ? 5 : 4, NULL);
        for (char *c = h->snippet; c && *c; c++) *c = *c == 2 ? '[' : *c == 3 ? ']' : *c;
        if (!h->title || !h->snippet) {
            rc = dbi_fail(d, err, LLC_ERR_NOMEM, "out of memory (while %s)", what);
            goto done;
        }
    }
    rc = rc == SQLITE_DONE ? 0 : dbi_sqlfail(d, rc, what, err);
done:
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    free(expr);
    if (rc) {
        db_hits_free(arr, cnt);
        return rc;
    }
    *out = arr;
    *n = cnt;
    return 0;
}

/* ---- Markdown export ------------------------------------------------------ */

static const char *role_header(int role) {
    switch (role) {
    case DB_ROLE_SYSTEM: return "**System**";
    case DB_ROLE_USER: return "**User**";
    case DB_ROLE_ASSISTANT: return "**Assistant**";
    default: return "**?**";
    }
}

/* Writes a block of text, making sure it ends with a newline. */
static void put_block(FILE *f, const char *s, size_t n) {
    if (n) fwrite(s, 1, n, f);
    if (!n || s[n - 1] != '\n') fputc('\n', f);
}

void db_markdown_reasoning(FILE *f, const char *s, size_t n) {
    fputs("> *Reasoning*\n>\n> ", f);
    for (size_t k = 0; k < n; k++) {
        fputc(s[k], f);
        if (s[k] == '\n') fputs("> ", f);
    }
    fputs("\n\n", f);
}

int db_export_markdown(db *d, int64_t session_id, int64_t leaf, FILE *f, llc_err *err) {
    if (!f) return dbi_fail(d, err, LLC_ERR_RANGE, "no output file (while exporting)");
    db_session s;
    int rc = db_session_get(d, session_id, &s, err);
    if (rc) return rc;
    if (!leaf) leaf = s.active_leaf;
    db_message *path = NULL;
    int n = 0;
    if (leaf && (rc = db_message_path(d, leaf, &path, &n, err))) goto done;
    if (n && path[0].session_id != session_id) {
        rc = dbi_fail(d, err, LLC_ERR_NOTFOUND, "message %lld is not in session %lld",
                      (long long)leaf, (long long)session_id);
        goto done;
    }
    fprintf(f, "# %s\n\n", *s.title ? s.title : "Untitled chat");
    if (*s.model) fprintf(f, "*Model: %s*\n\n", s.model);
    if (*s.system_prompt) {
        fputs("**System prompt**\n\n", f);
        put_block(f, s.system_prompt, strlen(s.system_prompt));
        fputs("\n", f);
    }
    for (int i = 0; i < n; i++) {
        const db_message *m = &path[i];
        fprintf(f, "%s", role_header(m->role));
        if (m->state != DB_STATE_DONE) fprintf(f, " *(%s)*", db_state_name(m->state));
        fputs("\n\n", f);
        if (m->reasoning_len) db_markdown_reasoning(f, m->reasoning, m->reasoning_len);
        put_block(f, m->content, m->content_len);
        if (m->role == DB_ROLE_ASSISTANT && m->state == DB_STATE_DONE && !strcmp(m->finish, "length"))
            fputs("\n*(cut off at max_tokens)*\n", f);
        else if (m->role == DB_ROLE_ASSISTANT && m->state == DB_STATE_DONE && !strcmp(m->finish, "context"))
            fputs("\n*(cut off: the context was full)*\n", f);
        fputs("\n", f);
    }
    if (fflush(f) != 0 || ferror(f)) {
        d->last_code = LLC_ERR_IO;
        rc = llc_fail(err, LLC_ERR_IO, "cannot write the Markdown export of session %lld (%s)",
                      (long long)session_id, strerror(errno));
    }
done:
    db_messages_free(path, n);
    db_session_clear(&s);
    return rc;
}
