/* db_messages.c — the message tree of a session: adding messages, streaming
 * updates of an answer, finishing it with its usage numbers, paths root -> leaf,
 * alternatives (children of one parent), following a branch to its latest leaf,
 * and deleting subtrees. */
#include "storage/db_internal.h"

#include <stdlib.h>
#include <string.h>

void db_message_clear(db_message *m) {
    if (!m) return;
    free(m->content);
    free(m->finish);
    free(m->reasoning);
    memset(m, 0, sizeof *m);
}

void db_messages_free(db_message *arr, int n) {
    if (!arr) return;
    for (int i = 0; i < n; i++) db_message_clear(&arr[i]);
    free(arr);
}

int dbi_read_message(db *d, sqlite3_stmt *st, db_message *m, llc_err *err) {
    memset(m, 0, sizeof *m);
    m->id = sqlite3_column_int64(st, 0);
    m->session_id = sqlite3_column_int64(st, 1);
    m->parent_id = sqlite3_column_int64(st, 2); /* NULL reads as 0 */
    m->role = sqlite3_column_int(st, 3);
    m->state = sqlite3_column_int(st, 4);
    m->content = dbi_col_dup(st, 5, &m->content_len);
    m->created = sqlite3_column_int64(st, 6);
    m->usage.prompt_tokens = sqlite3_column_int64(st, 7);
    m->usage.cached_tokens = sqlite3_column_int64(st, 8);
    m->usage.completion_tokens = sqlite3_column_int64(st, 9);
    m->usage.ttft_ms = sqlite3_column_double(st, 10);
    m->usage.tpot_ms = sqlite3_column_double(st, 11);
    m->finish = dbi_col_dup(st, 12, NULL);
    m->reasoning = dbi_col_dup(st, 13, &m->reasoning_len);
    m->usage.reasoning_tokens = sqlite3_column_int64(st, 14);
    m->usage.reasoning_ms = sqlite3_column_double(st, 15);
    if (!m->content || !m->finish || !m->reasoning) {
        db_message_clear(m);
        return dbi_fail(d, err, LLC_ERR_NOMEM, "out of memory reading a message");
    }
    return 0;
}

/* Steps st and collects every row as a message: *out malloc'ed, *n rows. */
static int read_messages(db *d, sqlite3_stmt *st, const char *what, db_message **out, int *n,
                         llc_err *err) {
    db_message *arr = NULL;
    int cnt = 0, cap = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            int ncap = cap ? cap * 2 : 16;
            db_message *na = realloc(arr, (size_t)ncap * sizeof *na);
            if (!na) {
                rc = dbi_fail(d, err, LLC_ERR_NOMEM, "out of memory (while %s)", what);
                goto done;
            }
            arr = na;
            cap = ncap;
        }
        if ((rc = dbi_read_message(d, st, &arr[cnt], err))) goto done;
        cnt++;
    }
    rc = rc == SQLITE_DONE ? 0 : dbi_sqlfail(d, rc, what, err);
done:
    sqlite3_reset(st);
    if (rc) {
        db_messages_free(arr, cnt);
        return rc;
    }
    *out = arr;
    *n = cnt;
    return 0;
}

/* Runs st (bound already) expecting at most one integer row: 1 found, 0 none. */
static int query_id(db *d, sqlite3_stmt *st, int64_t *v, const char *what, llc_err *err) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *v = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (rc == SQLITE_ROW) return 1;
    if (rc == SQLITE_DONE) return 0;
    return dbi_sqlfail(d, rc, what, err);
}

static const char SQL_SESSION_EXISTS[] = "SELECT id FROM sessions WHERE id = ?1";
static const char SQL_MSG_SESSION[] = "SELECT session_id FROM messages WHERE id = ?1";
static const char SQL_MSG_INSERT[] =
    "INSERT INTO messages(session_id, parent_id, role, state, content, created)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
static const char SQL_SESSION_ADDED[] =
    "UPDATE sessions SET updated = ?2, active_leaf = ?3 WHERE id = ?1";

static bool valid_role(int role) { return role >= DB_ROLE_SYSTEM && role <= DB_ROLE_ASSISTANT; }
static bool valid_state(int state) { return state >= DB_STATE_DONE && state <= DB_STATE_ERROR; }

int db_message_add(db *d, int64_t session_id, int64_t parent_id, int role, const char *content,
                   size_t len, int state, int64_t *id_out, llc_err *err) {
    const char *what = "adding a message";
    if (id_out) *id_out = 0;
    if (!valid_role(role) || !valid_state(state))
        return dbi_fail(d, err, LLC_ERR_RANGE, "bad message role %d or state %d", role, state);
    int rc = dbi_begin(d, what, err);
    if (rc) return rc;
    int64_t v = 0, now = dbi_now_ms(), id = 0;
    sqlite3_stmt *st = dbi_stmt(d, SQL_SESSION_EXISTS, what, err);
    if (!st) goto fail_code;
    sqlite3_bind_int64(st, 1, session_id);
    if ((rc = query_id(d, st, &v, what, err)) < 0) goto fail;
    if (rc == 0) {
        rc = dbi_fail(d, err, LLC_ERR_NOTFOUND, "no session %lld (while %s)",
                      (long long)session_id, what);
        goto fail;
    }
    if (parent_id > 0) {
        if (!(st = dbi_stmt(d, SQL_MSG_SESSION, what, err))) goto fail_code;
        sqlite3_bind_int64(st, 1, parent_id);
        if ((rc = query_id(d, st, &v, what, err)) < 0) goto fail;
        if (rc == 0 || v != session_id) {
            rc = dbi_fail(d, err, LLC_ERR_NOTFOUND, "no message %lld in session %lld (while %s)",
                          (long long)parent_id, (long long)session_id, what);
            goto fail;
        }
    }
    if (!(st = dbi_stmt(d, SQL_MSG_INSERT, what, err))) goto fail_code;
    sqlite3_bind_int64(st, 1, session_id);
    if (parent_id > 0) sqlite3_bind_int64(st, 2, parent_id);
    else sqlite3_bind_null(st, 2);
    sqlite3_bind_int(st, 3, role);
    sqlite3_bind_int(st, 4, state);
    dbi_bind_text(st, 5, content, len);
    sqlite3_bind_int64(st, 6, now);
    if ((rc = dbi_step_done(d, st, what, err))) goto fail;
    id = sqlite3_last_insert_rowid(d->h);
    if (!(st = dbi_stmt(d, SQL_SESSION_ADDED, what, err))) goto fail_code;
    sqlite3_bind_int64(st, 1, session_id);
    sqlite3_bind_int64(st, 2, now);
    sqlite3_bind_int64(st, 3, id);
    if ((rc = dbi_step_done(d, st, what, err))) goto fail;
    if ((rc = dbi_commit(d, what, err))) return rc;
    if (id_out) *id_out = id;
    return 0;
fail_code:
    rc = d->last_code;
fail:
    dbi_rollback(d);
    return rc;
}

static const char SQL_SET_CONTENT[] =
    "UPDATE messages SET content = ?2, state = ?3 WHERE id = ?1";

int db_message_set_content(db *d, int64_t id, const char *content, size_t len, int state,
                           llc_err *err) {
    const char *what = "saving a message";
    if (!valid_state(state)) return dbi_fail(d, err, LLC_ERR_RANGE, "bad message state %d", state);
    int rc = dbi_begin(d, what, err);
    if (rc) return rc;
    sqlite3_stmt *st = dbi_stmt(d, SQL_SET_CONTENT, what, err);
    if (!st) {
        dbi_rollback(d);
        return d->last_code;
    }
    sqlite3_bind_int64(st, 1, id);
    dbi_bind_text(st, 2, content, len);
    sqlite3_bind_int(st, 3, state);
    rc = dbi_step_done(d, st, what, err);
    if (!rc && sqlite3_changes(d->h) == 0)
        rc = dbi_fail(d, err, LLC_ERR_NOTFOUND, "no message %lld (while %s)", (long long)id, what);
    if (rc) {
        dbi_rollback(d);
        return rc;
    }
    return dbi_commit(d, what, err);
}

static const char SQL_SET_REASONING[] = "UPDATE messages SET reasoning = ?2 WHERE id = ?1";

int db_message_set_reasoning(db *d, int64_t id, const char *reasoning, size_t len, llc_err *err) {
    const char *what = "saving an answer's reasoning";
    sqlite3_stmt *st = dbi_stmt(d, SQL_SET_REASONING, what, err);
    if (!st) return d->last_code;
    sqlite3_bind_int64(st, 1, id);
    dbi_bind_text(st, 2, reasoning, len);
    int rc = dbi_step_done(d, st, what, err);
    if (!rc && sqlite3_changes(d->h) == 0)
        rc = dbi_fail(d, err, LLC_ERR_NOTFOUND, "no message %lld (while %s)", (long long)id, what);
    return rc;
}

static const char SQL_FINISH[] =
    "UPDATE messages SET content = coalesce(?2, content), state = ?3, prompt_tokens = ?4,"
    " cached_tokens = ?5, completion_tokens = ?6, ttft_ms = ?7, tpot_ms = ?8, finish = ?9,"
    " reasoning_tokens = ?10, reasoning_ms = ?11 WHERE id = ?1";
static const char SQL_TOUCH_BY_MSG[] =
    "UPDATE sessions SET updated = ?2 WHERE id = (SELECT session_id FROM messages WHERE id = ?1)";

int db_message_finish(db *d, int64_t id, const char *content, size_t len, int state,
                      const db_usage *usage, const char *finish, llc_err *err) {
    const char *what = "saving a finished message";
    if (!valid_state(state)) return dbi_fail(d, err, LLC_ERR_RANGE, "bad message state %d", state);
    db_usage u = {0};
    if (usage) u = *usage;
    int rc = dbi_begin(d, what, err);
    if (rc) return rc;
    sqlite3_stmt *st = dbi_stmt(d, SQL_FINISH, what, err);
    if (!st) goto fail_code;
    sqlite3_bind_int64(st, 1, id);
    if (content) dbi_bind_text(st, 2, content, len);
    else sqlite3_bind_null(st, 2);
    sqlite3_bind_int(st, 3, state);
    sqlite3_bind_int64(st, 4, u.prompt_tokens);
    sqlite3_bind_int64(st, 5, u.cached_tokens);
    sqlite3_bind_int64(st, 6, u.completion_tokens);
    sqlite3_bind_double(st, 7, u.ttft_ms);
    sqlite3_bind_double(st, 8, u.tpot_ms);
    dbi_bind_text(st, 9, finish, DB_NTS);
    sqlite3_bind_int64(st, 10, u.reasoning_tokens);
    sqlite3_bind_double(st, 11, u.reasoning_ms);
    if ((rc = dbi_step_done(d, st, what, err))) goto fail;
    if (sqlite3_changes(d->h) == 0) {
        rc = dbi_fail(d, err, LLC_ERR_NOTFOUND, "no message %lld (while %s)", (long long)id, what);
        goto fail;
    }
    if (!(st = dbi_stmt(d, SQL_TOUCH_BY_MSG, what, err))) goto fail_code;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, dbi_now_ms());
    if ((rc = dbi_step_done(d, st, what, err))) goto fail;
    return dbi_commit(d, what, err);
fail_code:
    rc = d->last_code;
fail:
    dbi_rollback(d);
    return rc;
}

static const char SQL_MSG_GET[] = "SELECT " DBI_MSG_COLS " FROM messages m WHERE m.id = ?1";

int db_message_get(db *d, int64_t id, db_message *out, llc_err *err) {
    memset(out, 0, sizeof *out);
    const char *what = "reading a message";
    sqlite3_stmt *st = dbi_stmt(d, SQL_MSG_GET, what, err);
    if (!st) return d->last_code;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) rc = dbi_read_message(d, st, out, err);
    else if (rc == SQLITE_DONE)
        rc = dbi_fail(d, err, LLC_ERR_NOTFOUND, "no message %lld", (long long)id);
    else rc = dbi_sqlfail(d, rc, what, err);
    sqlite3_reset(st);
    return rc;
}

/* Walks parent links up from ?1; parent_id < id holds for every message, which
 * also guarantees the walk ends on a hand-edited file. */
static const char SQL_PATH[] =
    "WITH RECURSIVE p(id, depth) AS ("
    "  SELECT ?1, 0"
    "  UNION ALL"
    "  SELECT m.parent_id, p.depth + 1 FROM messages m JOIN p ON m.id = p.id"
    "   WHERE m.parent_id IS NOT NULL AND m.parent_id < m.id)"
    " SELECT " DBI_MSG_COLS " FROM p JOIN messages m ON m.id = p.id ORDER BY p.depth DESC";

int db_message_path(db *d, int64_t leaf_id, db_message **out, int *n, llc_err *err) {
    *out = NULL;
    *n = 0;
    if (leaf_id <= 0) return 0;
    const char *what = "reading a conversation";
    sqlite3_stmt *st = dbi_stmt(d, SQL_PATH, what, err);
    if (!st) return d->last_code;
    sqlite3_bind_int64(st, 1, leaf_id);
    int rc = read_messages(d, st, what, out, n, err);
    if (!rc && *n == 0)
        rc = dbi_fail(d, err, LLC_ERR_NOTFOUND, "no message %lld", (long long)leaf_id);
    return rc;
}

static const char SQL_ROOTS[] = "SELECT " DBI_MSG_COLS " FROM messages m"
                                " WHERE m.session_id = ?1 AND m.parent_id IS NULL"
                                " ORDER BY m.created, m.id";
static const char SQL_CHILDREN[] = "SELECT " DBI_MSG_COLS " FROM messages m"
                                   " WHERE m.parent_id = ?1 ORDER BY m.created, m.id";

int db_message_children(db *d, int64_t session_id, int64_t parent_id, db_message **out, int *n,
                        llc_err *err) {
    *out = NULL;
    *n = 0;
    const char *what = "reading alternatives";
    sqlite3_stmt *st = dbi_stmt(d, parent_id > 0 ? SQL_CHILDREN : SQL_ROOTS, what, err);
    if (!st) return d->last_code;
    sqlite3_bind_int64(st, 1, parent_id > 0 ? parent_id : session_id);
    return read_messages(d, st, what, out, n, err);
}

static const char SQL_MSG_EXISTS[] = "SELECT id FROM messages WHERE id = ?1";
static const char SQL_LATEST_CHILD[] = "SELECT id FROM messages WHERE parent_id = ?1 AND id > ?1"
                                       " ORDER BY created DESC, id DESC LIMIT 1";
static const char SQL_LATEST_ROOT[] = "SELECT id FROM messages"
                                      " WHERE session_id = ?1 AND parent_id IS NULL"
                                      " ORDER BY created DESC, id DESC LIMIT 1";

/* Follows the latest child from id (which exists) down to a leaf. */
static int follow_latest(db *d, int64_t id, int64_t *leaf, const char *what, llc_err *err) {
    for (;;) {
        sqlite3_stmt *st = dbi_stmt(d, SQL_LATEST_CHILD, what, err);
        if (!st) return d->last_code;
        sqlite3_bind_int64(st, 1, id);
        int64_t child;
        int rc = query_id(d, st, &child, what, err);
        if (rc < 0) return rc;
        if (rc == 0) break;
        id = child;
    }
    *leaf = id;
    return 0;
}

int db_message_latest_leaf(db *d, int64_t message_id, int64_t *leaf_out, llc_err *err) {
    *leaf_out = 0;
    const char *what = "finding the latest message of a branch";
    sqlite3_stmt *st = dbi_stmt(d, SQL_MSG_EXISTS, what, err);
    if (!st) return d->last_code;
    sqlite3_bind_int64(st, 1, message_id);
    int64_t v;
    int rc = query_id(d, st, &v, what, err);
    if (rc < 0) return rc;
    if (rc == 0)
        return dbi_fail(d, err, LLC_ERR_NOTFOUND, "no message %lld", (long long)message_id);
    return follow_latest(d, message_id, leaf_out, what, err);
}

static const char SQL_MSG_PLACE[] =
    "SELECT m.session_id, coalesce(m.parent_id, 0), s.active_leaf"
    " FROM messages m JOIN sessions s ON s.id = m.session_id WHERE m.id = ?1";
static const char SQL_DELETE_SUBTREE[] =
    "DELETE FROM messages WHERE id IN ("
    " WITH RECURSIVE sub(id) AS (SELECT ?1 UNION ALL"
    "  SELECT m.id FROM messages m JOIN sub ON m.parent_id = sub.id WHERE m.id > sub.id)"
    " SELECT id FROM sub)";
static const char SQL_SET_LEAF[] = "UPDATE sessions SET active_leaf = ?2 WHERE id = ?1";

int db_message_delete(db *d, int64_t id, llc_err *err) {
    const char *what = "deleting messages";
    int rc = dbi_begin(d, what, err);
    if (rc) return rc;
    int64_t session_id = 0, parent = 0, active = 0, v;
    sqlite3_stmt *st = dbi_stmt(d, SQL_MSG_PLACE, what, err);
    if (!st) goto fail_code;
    sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        session_id = sqlite3_column_int64(st, 0);
        parent = sqlite3_column_int64(st, 1);
        active = sqlite3_column_int64(st, 2);
    }
    sqlite3_reset(st);
    if (rc == SQLITE_DONE) {
        rc = dbi_fail(d, err, LLC_ERR_NOTFOUND, "no message %lld", (long long)id);
        goto fail;
    }
    if (rc != SQLITE_ROW) {
        rc = dbi_sqlfail(d, rc, what, err);
        goto fail;
    }
    if (!(st = dbi_stmt(d, SQL_DELETE_SUBTREE, what, err))) goto fail_code;
    sqlite3_bind_int64(st, 1, id);
    if ((rc = dbi_step_done(d, st, what, err))) goto fail;

    /* Was the active leaf in the deleted subtree? */
    if (active > 0) {
        if (!(st = dbi_stmt(d, SQL_MSG_EXISTS, what, err))) goto fail_code;
        sqlite3_bind_int64(st, 1, active);
        if ((rc = query_id(d, st, &v, what, err)) < 0) goto fail;
        if (rc == 0) {
            int64_t from = parent, leaf = 0;
            if (!from) {
                if (!(st = dbi_stmt(d, SQL_LATEST_ROOT, what, err))) goto fail_code;
                sqlite3_bind_int64(st, 1, session_id);
                if ((rc = query_id(d, st, &from, what, err)) < 0) goto fail;
                if (rc == 0) from = 0;
            }
            if (from && (rc = follow_latest(d, from, &leaf, what, err))) goto fail;
            if (!(st = dbi_stmt(d, SQL_SET_LEAF, what, err))) goto fail_code;
            sqlite3_bind_int64(st, 1, session_id);
            sqlite3_bind_int64(st, 2, leaf);
            if ((rc = dbi_step_done(d, st, what, err))) goto fail;
        }
    }
    return dbi_commit(d, what, err);
fail_code:
    rc = d->last_code;
fail:
    dbi_rollback(d);
    return rc;
}
