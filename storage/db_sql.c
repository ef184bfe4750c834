/* db_sql.c — the SQLite helpers every storage/db*.c file calls: the mapping of
 * SQLite result codes to DB_ERR_* codes and one-line messages, the
 * prepared-statement cache, transactions, and small column/bind helpers. It
 * calls no other storage/ file (scripts/check-calls checks it). */
#include "storage/db_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- errors --------------------------------------------------------------- */

int dbi_fail(db *d, llc_err *err, int code, const char *fmt, ...) {
    if (d) d->last_code = code;
    if (!err) return code;
    char msg[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *p = d && d->path ? d->path : "database";
    size_t pl = strlen(p);
    if (pl > 120) /* keep the end of a long path: it names the file */
        return llc_fail(err, code, "...%s: %s", p + pl - 117, msg);
    return llc_fail(err, code, "%s: %s", p, msg);
}

int dbi_code(int rc) {
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE: return 0;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_PROTOCOL: return DB_ERR_LOCKED;
    case SQLITE_READONLY: return DB_ERR_READONLY;
    case SQLITE_FULL: return DB_ERR_FULL;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return DB_ERR_CORRUPT;
    case SQLITE_NOMEM: return LLC_ERR_NOMEM;
    case SQLITE_TOOBIG:
    case SQLITE_CONSTRAINT:
    case SQLITE_RANGE:
    case SQLITE_MISMATCH: return LLC_ERR_RANGE;
    default: return LLC_ERR_IO;
    }
}

int dbi_sqlfail(db *d, int rc, const char *what, llc_err *err) {
    const char *em = d && d->h ? sqlite3_errmsg(d->h) : sqlite3_errstr(rc);
    int sys = d && d->h ? sqlite3_system_errno(d->h) : 0;
    const char *detail = sys ? strerror(sys) : em;
    int code = dbi_code(rc);
    if (!code) code = LLC_ERR_IO; /* a caller treated OK/ROW/DONE as a failure */
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_PROTOCOL:
        return dbi_fail(d, err, code, "database is locked by another program (while %s)", what);
    case SQLITE_READONLY:
        return dbi_fail(d, err, code, "database is read-only (while %s)", what);
    case SQLITE_FULL: return dbi_fail(d, err, code, "disk is full (while %s)", what);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return dbi_fail(d, err, code, "database is corrupt (while %s: %s)", what, em);
    case SQLITE_NOMEM: return dbi_fail(d, err, code, "out of memory (while %s)", what);
    case SQLITE_IOERR:
        return dbi_fail(d, err, code, "I/O error while %s (%s)", what, detail);
    case SQLITE_CANTOPEN:
        return dbi_fail(d, err, code, "cannot open the database file (%s)", detail);
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return dbi_fail(d, err, code, "permission denied (while %s)", what);
    case SQLITE_TOOBIG:
        return dbi_fail(d, err, code, "too large to store (while %s)", what);
    default: return dbi_fail(d, err, code, "SQLite error while %s: %s", what, em);
    }
}

/* ---- statements and transactions ------------------------------------------ */

sqlite3_stmt *dbi_stmt(db *d, const char *sql, const char *what, llc_err *err) {
    for (int i = 0; i < d->n_cache; i++) {
        if (d->cache[i].sql == sql) {
            sqlite3_reset(d->cache[i].st);
            sqlite3_clear_bindings(d->cache[i].st);
            return d->cache[i].st;
        }
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v3(d->h, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(st);
        dbi_sqlfail(d, rc, what, err);
        return NULL;
    }
    LLC_ASSERT(d->n_cache < DBI_STMT_CACHE); /* a fixed set of static SQL strings */
    d->cache[d->n_cache].sql = sql;
    d->cache[d->n_cache].st = st;
    d->n_cache++;
    return st;
}

int dbi_step_done(db *d, sqlite3_stmt *st, const char *what, llc_err *err) {
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW) return 0;
    return dbi_sqlfail(d, rc, what, err);
}

static const char SQL_BEGIN[] = "BEGIN IMMEDIATE";
static const char SQL_COMMIT[] = "COMMIT";
static const char SQL_ROLLBACK[] = "ROLLBACK";

int dbi_begin(db *d, const char *what, llc_err *err) {
    if (d->readonly)
        return dbi_fail(d, err, DB_ERR_READONLY, "database is read-only (while %s)", what);
    sqlite3_stmt *st = dbi_stmt(d, SQL_BEGIN, what, err);
    if (!st) return d->last_code;
    return dbi_step_done(d, st, what, err);
}

void dbi_rollback(db *d) {
    if (sqlite3_get_autocommit(d->h)) return; /* SQLite already rolled it back */
    sqlite3_stmt *st = dbi_stmt(d, SQL_ROLLBACK, "rolling back", NULL);
    if (st) {
        sqlite3_step(st);
        sqlite3_reset(st);
    }
}

int dbi_commit(db *d, const char *what, llc_err *err) {
    sqlite3_stmt *st = dbi_stmt(d, SQL_COMMIT, what, err);
    int rc = st ? dbi_step_done(d, st, what, err) : d->last_code;
    if (rc) dbi_rollback(d);
    return rc;
}

int dbi_exec(db *d, const char *sql, const char *what, llc_err *err) {
    int rc = sqlite3_exec(d->h, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : dbi_sqlfail(d, rc, what, err);
}

int64_t dbi_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *dbi_col_dup(sqlite3_stmt *st, int col, size_t *len_out) {
    const unsigned char *s = sqlite3_column_text(st, col);
    size_t n = s ? (size_t)sqlite3_column_bytes(st, col) : 0;
    char *p = malloc(n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    if (len_out) *len_out = n;
    return p;
}

int dbi_bind_text(sqlite3_stmt *st, int idx, const char *s, size_t len) {
    if (!s) return sqlite3_bind_text(st, idx, "", 0, SQLITE_STATIC);
    if (len == DB_NTS) len = strlen(s);
    return sqlite3_bind_text64(st, idx, s, len, SQLITE_STATIC, SQLITE_UTF8);
}
