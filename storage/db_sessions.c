/* db_sessions.c — sessions (create, read, list, setters, delete) and the UI
 * state kept with them: open tabs and key/value settings. */
#include "storage/db_internal.h"

#include <stdlib.h>
#include <string.h>

void db_session_clear(db_session *s) {
    if (!s) return;
    free(s->title);
    free(s->system_prompt);
    free(s->model);
    free(s->params_json);
    memset(s, 0, sizeof *s);
}

void db_sessions_free(db_session *arr, int n) {
    if (!arr) return;
    for (int i = 0; i < n; i++) db_session_clear(&arr[i]);
    free(arr);
}

#define SESSION_COLS \
    "id, title, created, updated, system_prompt, model, params_json, archived, active_leaf"

static int read_session(db *d, sqlite3_stmt *st, db_session *s, llc_err *err) {
    memset(s, 0, sizeof *s);
    s->id = sqlite3_column_int64(st, 0);
    s->title = dbi_col_dup(st, 1, NULL);
    s->created = sqlite3_column_int64(st, 2);
    s->updated = sqlite3_column_int64(st, 3);
    s->system_prompt = dbi_col_dup(st, 4, NULL);
    s->model = dbi_col_dup(st, 5, NULL);
    s->params_json = dbi_col_dup(st, 6, NULL);
    s->archived = sqlite3_column_int(st, 7) != 0;
    s->active_leaf = sqlite3_column_int64(st, 8);
    if (!s->title || !s->system_prompt || !s->model || !s->params_json) {
        db_session_clear(s);
        return dbi_fail(d, err, LLC_ERR_NOMEM, "out of memory reading a session");
    }
    return 0;
}

static const char SQL_CREATE[] =
    "INSERT INTO sessions(title, created, updated, system_prompt, model, params_json)"
    " VALUES (?1, ?2, ?2, ?3, ?4, ?5)";

int db_session_create(db *d, const char *title, const char *system_prompt, const char *model,
                      const char *params_json, int64_t *id_out, llc_err *err) {
    const char *what = "creating a session";
    if (id_out) *id_out = 0;
    int rc = dbi_begin(d, what, err);
    if (rc) return rc;
    sqlite3_stmt *st = dbi_stmt(d, SQL_CREATE, what, err);
    if (!st) {
        dbi_rollback(d);
        return d->last_code;
    }
    dbi_bind_text(st, 1, title, DB_NTS);
    sqlite3_bind_int64(st, 2, dbi_now_ms());
    dbi_bind_text(st, 3, system_prompt, DB_NTS);
    dbi_bind_text(st, 4, model, DB_NTS);
    dbi_bind_text(st, 5, params_json, DB_NTS);
    rc = dbi_step_done(d, st, what, err);
    int64_t id = sqlite3_last_insert_rowid(d->h);
    if (!rc) rc = dbi_commit(d, what, err);
    else dbi_rollback(d);
    if (!rc && id_out) *id_out = id;
    return rc;
}

static const char SQL_GET[] = "SELECT " SESSION_COLS " FROM sessions WHERE id = ?1";

int db_session_get(db *d, int64_t id, db_session *out, llc_err *err) {
    memset(out, 0, sizeof *out);
    const char *what = "reading a session";
    sqlite3_stmt *st = dbi_stmt(d, SQL_GET, what, err);
    if (!st) return d->last_code;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) rc = read_session(d, st, out, err);
    else if (rc == SQLITE_DONE)
        rc = dbi_fail(d, err, LLC_ERR_NOTFOUND, "no session %lld", (long long)id);
    else rc = dbi_sqlfail(d, rc, what, err);
    sqlite3_reset(st);
    return rc;
}

static const char SQL_LIST[] = "SELECT " SESSION_COLS " FROM sessions WHERE archived = 0"
                               " ORDER BY updated DESC, id DESC";
static const char SQL_LIST_ALL[] = "SELECT " SESSION_COLS " FROM sessions"
                                   " ORDER BY updated DESC, id DESC";

int db_session_list(db *d, bool include_archived, db_session **out, int *n, llc_err *err) {
    *out = NULL;
    *n = 0;
    const char *what = "listing sessions";
    sqlite3_stmt *st = dbi_stmt(d, include_archived ? SQL_LIST_ALL : SQL_LIST, what, err);
    if (!st) return d->last_code;
    db_session *arr = NULL;
    int cnt = 0, cap = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            int ncap = cap ? cap * 2 : 16;
            db_session *na = realloc(arr, (size_t)ncap * sizeof *na);
            if (!na) {
                rc = dbi_fail(d, err, LLC_ERR_NOMEM, "out of memory listing sessions");
                goto done;
            }
            arr = na;
            cap = ncap;
        }
        if ((rc = read_session(d, st, &arr[cnt], err))) goto done;
        cnt++;
    }
    rc = rc == SQLITE_DONE ? 0 : dbi_sqlfail(d, rc, what, err);
done:
    sqlite3_reset(st);
    if (rc) {
        db_sessions_free(arr, cnt);
        return rc;
    }
    *out = arr;
    *n = cnt;
    return 0;
}

/* One UPDATE of one session in its own transaction; NOTFOUND when no row changed. */
static int update_session(db *d, const char *sql, int64_t id, const char *text, int64_t num,
                          const char *what, llc_err *err) {
    int rc = dbi_begin(d, what, err);
    if (rc) return rc;
    sqlite3_stmt *st = dbi_stmt(d, sql, what, err);
    if (!st) {
        dbi_rollback(d);
        return d->last_code;
    }
    sqlite3_bind_int64(st, 1, id);
    if (text) dbi_bind_text(st, 2, text, DB_NTS);
    else sqlite3_bind_int64(st, 2, num);
    rc = dbi_step_done(d, st, what, err);
    if (!rc && sqlite3_changes(d->h) == 0)
        rc = dbi_fail(d, err, LLC_ERR_NOTFOUND, "no session %lld (while %s)", (long long)id,
                      what);
    if (rc) {
        dbi_rollback(d);
        return rc;
    }
    return dbi_commit(d, what, err);
}

static const char SQL_SET_TITLE[] = "UPDATE sessions SET title = ?2 WHERE id = ?1";
static const char SQL_SET_SYSTEM[] = "UPDATE sessions SET system_prompt = ?2 WHERE id = ?1";
static const char SQL_SET_MODEL[] = "UPDATE sessions SET model = ?2 WHERE id = ?1";
static const char SQL_SET_PARAMS[] = "UPDATE sessions SET params_json = ?2 WHERE id = ?1";
static const char SQL_SET_ARCHIVED[] = "UPDATE sessions SET archived = ?2 WHERE id = ?1";
static const char SQL_TOUCH[] = "UPDATE sessions SET updated = ?2 WHERE id = ?1";
static const char SQL_SET_LEAF[] =
    "UPDATE sessions SET active_leaf = ?2 WHERE id = ?1 AND (?2 = 0 OR EXISTS("
    "SELECT 1 FROM messages WHERE id = ?2 AND session_id = ?1))";
static const char SQL_DELETE[] = "DELETE FROM sessions WHERE id = ?1";

int db_session_set_title(db *d, int64_t id, const char *title, llc_err *err) {
    return update_session(d, SQL_SET_TITLE, id, title ? title : "", 0, "setting a title", err);
}
int db_session_set_system(db *d, int64_t id, const char *system_prompt, llc_err *err) {
    return update_session(d, SQL_SET_SYSTEM, id, system_prompt ? system_prompt : "", 0,
                          "setting a system prompt", err);
}
int db_session_set_model(db *d, int64_t id, const char *model, llc_err *err) {
    return update_session(d, SQL_SET_MODEL, id, model ? model : "", 0, "setting a model", err);
}
int db_session_set_params(db *d, int64_t id, const char *params_json, llc_err *err) {
    return update_session(d, SQL_SET_PARAMS, id, params_json ? params_json : "", 0,
                          "setting sampling parameters", err);
}
int db_session_set_archived(db *d, int64_t id, bool archived, llc_err *err) {
    return update_session(d, SQL_SET_ARCHIVED, id, NULL, archived ? 1 : 0,
                          "archiving a session", err);
}
int db_session_set_active_leaf(db *d, int64_t id, int64_t leaf, llc_err *err) {
    int rc = update_session(d, SQL_SET_LEAF, id, NULL, leaf < 0 ? 0 : leaf,
                            "setting the active message", err);
    if (rc == LLC_ERR_NOTFOUND)
        rc = dbi_fail(d, err, rc, "no session %lld with a message %lld", (long long)id,
                      (long long)leaf);
    return rc;
}
int db_session_touch(db *d, int64_t id, llc_err *err) {
    return update_session(d, SQL_TOUCH, id, NULL, dbi_now_ms(), "touching a session", err);
}

int db_session_delete(db *d, int64_t id, llc_err *err) {
    const char *what = "deleting a session";
    int rc = dbi_begin(d, what, err);
    if (rc) return rc;
    sqlite3_stmt *st = dbi_stmt(d, SQL_DELETE, what, err);
    if (!st) {
        dbi_rollback(d);
        return d->last_code;
    }
    sqlite3_bind_int64(st, 1, id);
    rc = dbi_step_done(d, st, what, err); /* messages and tabs go by ON DELETE CASCADE */
    if (!rc && sqlite3_changes(d->h) == 0)
        rc = dbi_fail(d, err, LLC_ERR_NOTFOUND, "no session %lld", (long long)id);
    if (rc) {
        dbi_rollback(d);
        return rc;
    }
    return dbi_commit(d, what, err);
}

/* ---- tabs ----------------------------------------------------------------- */

static const char SQL_TABS_CLEAR[] = "DELETE FROM tabs";
static const char SQL_TABS_ADD[] = "INSERT INTO tabs(position, session_id, active)"
                                   " SELECT ?1, ?2, ?3 WHERE EXISTS("
                                   "SELECT 1 FROM sessions WHERE id = ?2)";
static const char SQL_TABS_LOAD[] = "SELECT session_id, active FROM tabs ORDER BY position";

int db_tabs_save(db *d, const int64_t *session_ids, int n, int active_index, llc_err *err) {
    const char *what = "saving tabs";
    if (n < 0 || (n > 0 && !session_ids))
        return dbi_fail(d, err, LLC_ERR_RANGE, "bad tab list (while %s)", what);
    int rc = dbi_begin(d, what, err);
    if (rc) return rc;
    sqlite3_stmt *st = dbi_stmt(d, SQL_TABS_CLEAR, what, err);
    rc = st ? dbi_step_done(d, st, what, err) : d->last_code;
    for (int i = 0; !rc && i < n; i++) {
        if (!(st = dbi_stmt(d, SQL_TABS_ADD, what, err))) {
            rc = d->last_code;
            break;
        }
        sqlite3_bind_int(st, 1, i);
        sqlite3_bind_int64(st, 2, session_ids[i]);
        sqlite3_bind_int(st, 3, i == active_index);
        rc = dbi_step_done(d, st, what, err);
    }
    if (rc) {
        dbi_rollback(d);
        return rc;
    }
    return dbi_commit(d, what, err);
}

int db_tabs_load(db *d, int64_t **ids_out, int *n, int *active_index, llc_err *err) {
    *ids_out = NULL;
    *n = 0;
    if (active_index) *active_index = -1;
    const char *what = "loading tabs";
    sqlite3_stmt *st = dbi_stmt(d, SQL_TABS_LOAD, what, err);
    if (!st) return d->last_code;
    int64_t *ids = NULL;
    int cnt = 0, cap = 0, active = -1, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            int ncap = cap ? cap * 2 : 16;
            int64_t *na = realloc(ids, (size_t)ncap * sizeof *na);
            if (!na) {
                rc = dbi_fail(d, err, LLC_ERR_NOMEM, "out of memory loading tabs");
                goto done;
            }
            ids = na;
            cap = ncap;
        }
        if (sqlite3_column_int(st, 1)) active = cnt;
        ids[cnt++] = sqlite3_column_int64(st, 0);
    }
    rc = rc == SQLITE_DONE ? 0 : dbi_sqlfail(d, rc, what, err);
done:
    sqlite3_reset(st);
    if (rc) {
        free(ids);
        return rc;
    }
    *ids_out = ids;
    *n = cnt;
    if (active_index) *active_index = active;
    return 0;
}

/* ---- settings ------------------------------------------------------------- */

static const char SQL_SETTING_SET[] = "INSERT INTO settings(key, value) VALUES (?1, ?2)"
                                      " ON CONFLICT(key) DO UPDATE SET value = excluded.value";
static const char SQL_SETTING_DEL[] = "DELETE FROM settings WHERE key = ?1";
static const char SQL_SETTING_GET[] = "SELECT value FROM settings WHERE key = ?1";

int db_setting_set(db *d, const char *key, const char *value, llc_err *err) {
    const char *what = "saving a setting";
    if (!key) return dbi_fail(d, err, LLC_ERR_RANGE, "no setting name (while %s)", what);
    int rc = dbi_begin(d, what, err);
    if (rc) return rc;
    sqlite3_stmt *st = dbi_stmt(d, value ? SQL_SETTING_SET : SQL_SETTING_DEL, what, err);
    if (!st) {
        dbi_rollback(d);
        return d->last_code;
    }
    dbi_bind_text(st, 1, key, DB_NTS);
    if (value) dbi_bind_text(st, 2, value, DB_NTS);
    rc = dbi_step_done(d, st, what, err);
    if (rc) {
        dbi_rollback(d);
        return rc;
    }
    return dbi_commit(d, what, err);
}

int db_setting_get(db *d, const char *key, char **value_out, llc_err *err) {
    *value_out = NULL;
    const char *what = "reading a setting";
    if (!key) return dbi_fail(d, err, LLC_ERR_RANGE, "no setting name (while %s)", what);
    sqlite3_stmt *st = dbi_stmt(d, SQL_SETTING_GET, what, err);
    if (!st) return d->last_code;
    dbi_bind_text(st, 1, key, DB_NTS);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *value_out = dbi_col_dup(st, 0, NULL);
        rc = *value_out ? 0 : dbi_fail(d, err, LLC_ERR_NOMEM, "out of memory (while %s)", what);
    } else {
        rc = rc == SQLITE_DONE ? 0 : dbi_sqlfail(d, rc, what, err);
    }
    sqlite3_reset(st);
    return rc;
}
