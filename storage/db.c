/* db.c — opening and closing the chat database: the default path, validation of
 * an existing file before anything is written to it, connection settings, crash
 * recovery of streaming messages. The SQLite helpers every db*.c file calls
 * (error messages, statement cache, transactions) are in db_sql.c, which calls
 * nothing back, so db.c → db_schema.c → db_sql.c runs one way. */
#include "storage/db_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* PRAGMA application_id of an llmchat database ("llmc"); set by migration 1. */
#define DB_APP_ID 0x6c6c6d63

/* ---- names ---------------------------------------------------------------- */

const char *db_role_name(int role) {
    static const char *const names[] = {"system", "user", "assistant"};
    return role >= 0 && role < (int)LLC_ARRAY_LEN(names) ? names[role] : "?";
}

const char *db_state_name(int state) {
    static const char *const names[] = {"done", "streaming", "interrupted", "cancelled",
                                        "error"};
    return state >= 0 && state < (int)LLC_ARRAY_LEN(names) ? names[state] : "?";
}

/* ---- default path --------------------------------------------------------- */

/* mkdir -p with mode for the missing components. */
static int mkdir_p(char *path, llc_err *err) {
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != 0) continue;
        char c = *p;
        *p = 0;
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            int e = errno;
            int rc = llc_fail(err, LLC_ERR_IO, "%s: cannot create directory (%s)", path,
                              strerror(e));
            *p = c;
            return rc;
        }
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
            int rc = llc_fail(err, LLC_ERR_IO, "%s: exists and is not a directory", path);
            *p = c;
            return rc;
        }
        *p = c;
        if (!c) return 0;
    }
}

int db_default_path(char *buf, size_t n, llc_err *err) {
    char dir[PATH_MAX];
    const char *xdg = getenv("XDG_DATA_HOME");
    int len;
    if (xdg && xdg[0] == '/') {
        len = snprintf(dir, sizeof dir, "%s/llmchat", xdg);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home) {
            struct passwd *pw = getpwuid(getuid());
            home = pw ? pw->pw_dir : NULL;
        }
        if (!home || !*home)
            return llc_fail(err, LLC_ERR_NOTFOUND,
                            "no home directory: set HOME or XDG_DATA_HOME");
        len = snprintf(dir, sizeof dir, "%s/.local/share/llmchat", home);
    }
    if (len < 0 || (size_t)len >= sizeof dir)
        return llc_fail(err, LLC_ERR_RANGE, "database directory path is too long");
    int rc = mkdir_p(dir, err);
    if (rc) return rc;
    len = snprintf(buf, n, "%s/llmchat.db", dir);
    if (len < 0 || (size_t)len >= n)
        return llc_fail(err, LLC_ERR_RANGE, "%s/llmchat.db: path is too long", dir);
    return 0;
}

/* ---- opening -------------------------------------------------------------- */

static bool exists_at(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* A failure while validating an existing file: nothing has been written yet. */
static int open_sqlfail(db *d, int rc, llc_err *err) {
    switch (rc & 0xff) {
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
        return dbi_fail(d, err, DB_ERR_CORRUPT,
                        "not an llmchat database or it is corrupt (file left untouched)");
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return dbi_fail(d, err, DB_ERR_LOCKED,
                        "database is locked by another program (cannot open it now)");
    default: return dbi_sqlfail(d, rc, "opening", err);
    }
}

/* Runs a statement returning one integer (or text, when text != NULL). */
static int query1(db *d, const char *sql, int64_t *v, char *text, size_t text_n, llc_err *err) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(d->h, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        if (v) *v = sqlite3_column_int64(st, 0);
        if (text) {
            const char *s = (const char *)sqlite3_column_text(st, 0);
            snprintf(text, text_n, "%s", s ? s : "");
        }
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        if (v) *v = 0;
        if (text) text[0] = 0;
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : open_sqlfail(d, rc, err);
}

/* Reads the header, schema and every page's structure (quick_check), then
 * decides whether the file is ours and of a version we know. Only reads. */
static int validate(db *d, bool existing, int64_t *version, llc_err *err) {
    int64_t app_id, n_schema;
    int rc = query1(d, "PRAGMA application_id", &app_id, NULL, 0, err);
    if (!rc) rc = query1(d, "PRAGMA user_version", version, NULL, 0, err);
    if (!rc) rc = query1(d, "SELECT count(*) FROM sqlite_master", &n_schema, NULL, 0, err);
    if (rc) return rc;
    if (existing) {
        char res[200];
        rc = query1(d, "PRAGMA quick_check(1)", NULL, res, sizeof res, err);
        if (rc) return rc;
        if (strcmp(res, "ok") != 0) /* (res is SQLite's own report: "btreeInitPage() returns error code 11") */
            return dbi_fail(d, err, DB_ERR_CORRUPT,
                            "not an llmchat database or it is corrupt (file left untouched; its pages are "
                            "damaged: move it aside and llmchat starts a new one there)");
    }
    if ((app_id != 0 && app_id != DB_APP_ID) || (*version > 0 && app_id != DB_APP_ID) ||
        (*version == 0 && n_schema > 0))
        return dbi_fail(d, err, DB_ERR_FOREIGN,
                        "not an llmchat database: it belongs to another program (file left "
                        "untouched)");
    if (*version > DB_SCHEMA_VERSION)
        return dbi_fail(d, err, DB_ERR_TOO_NEW,
                        "database schema version %lld is newer than this llmchat knows (%d); "
                        "upgrade llmchat (file left untouched)",
                        (long long)*version, DB_SCHEMA_VERSION);
    return 0;
}

/* A pragma that sets a connection property (its result row, if any, is ignored). */
static int set_pragma(db *d, const char *sql, llc_err *err) {
    return query1(d, sql, NULL, NULL, 0, err);
}

/* Marks STREAMING messages INTERRUPTED. A failure (another program holds the
 * write lock, a full disk) is not fatal: they stay until the next open. */
static void recover_streaming(db *d) {
    if (dbi_begin(d, "recovering interrupted messages", NULL)) return;
    if (sqlite3_exec(d->h, "UPDATE messages SET state = 2 WHERE state = 1", NULL, NULL, NULL) ==
        SQLITE_OK) {
        int n = sqlite3_changes(d->h);
        if (dbi_commit(d, "recovering interrupted messages", NULL) == 0) d->interrupted = n;
    } else {
        dbi_rollback(d);
    }
}

/* Every writable llmchat connection holds a shared flock on PATH-lock for its
 * lifetime (a separate file: locks on the database file itself would disturb
 * SQLite's). Whoever gets it exclusively at open is the only llmchat connection,
 * so a STREAMING message cannot belong to a live program and is recovered. */
static void lock_and_recover(db *d, bool recover) {
    char lp[PATH_MAX];
    if (snprintf(lp, sizeof lp, "%s-lock", d->path) >= (int)sizeof lp) return;
    int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    if (recover && flock(fd, LOCK_EX | LOCK_NB) == 0) recover_streaming(d);
    for (int i = 0; i < 200; i++) { /* another opener holds it exclusively for a moment */
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
            d->lock_fd = fd;
            return;
        }
        if (errno != EWOULDBLOCK && errno != EINTR) break;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    close(fd);
}

/* Whether the directory holding path can take new files (-wal, -shm). */
static bool dir_writable(const char *path) {
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) return access(".", W_OK) == 0;
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= sizeof dir) return true;
    memcpy(dir, path, n);
    dir[n] = 0;
    return access(dir, W_OK) == 0;
}

/* Opens d->h; immutable: read-only through a URI with immutable=1 (no locks, no
 * -shm: for files in read-only places). */
static int open_handle(db *d, const char *path, int oflags, bool hot_wal, bool immutable,
                       llc_err *err) {
    int src;
    if (immutable) {
        size_t n = strlen(path);
        char *uri = malloc(n * 3 + 32);
        if (!uri) return dbi_fail(d, err, LLC_ERR_NOMEM, "out of memory (while opening)");
        size_t o = (size_t)sprintf(uri, "file:");
        for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
            if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                strchr("/-._~", *c))
                uri[o++] = (char)*c;
            else
                o += (size_t)sprintf(uri + o, "%%%02X", *c);
        }
        strcpy(uri + o, "?immutable=1");
        src = sqlite3_open_v2(uri, &d->h, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
        free(uri);
    } else {
        src = sqlite3_open_v2(path, &d->h, oflags, NULL);
    }
    if (src != SQLITE_OK) return open_sqlfail(d, src, err);
    sqlite3_extended_result_codes(d->h, 1);
    /* A WAL left with content by another program: should validation fail, closing
     * must not checkpoint it into the (then untouched) database file. */
    if (hot_wal) sqlite3_db_config(d->h, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
    sqlite3_busy_timeout(d->h, 2000);
    return 0;
}

static int open_impl(const char *path, unsigned flags, int target, bool recover, db **out,
                     llc_err *err) {
    if (!out) return llc_fail(err, LLC_ERR_RANGE, "db_open: no result pointer");
    *out = NULL;
    if (!path || !*path) return llc_fail(err, LLC_ERR_RANGE, "db_open: empty database path");
    db *d = calloc(1, sizeof *d);
    if (!d || !(d->path = strdup(path))) {
        free(d);
        return llc_fail(err, LLC_ERR_NOMEM, "%s: out of memory", path);
    }
    d->lock_fd = -1;
    int rc;

    struct stat st;
    bool existing = false, hot_wal = false;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            rc = dbi_fail(d, err, LLC_ERR_IO, "is a directory, not a database file");
            goto fail;
        }
        existing = st.st_size > 0;
        char wal[PATH_MAX];
        if (snprintf(wal, sizeof wal, "%s-wal", path) < (int)sizeof wal &&
            stat(wal, &st) == 0 && st.st_size > 0)
            hot_wal = true;
    }

    int oflags = (flags & DB_OPEN_READONLY) ? SQLITE_OPEN_READONLY
                                            : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (!(flags & DB_OPEN_READONLY) && !exists_at(path)) {
        /* a new database holds conversations: readable by its owner only (SQLite
           gives its -wal and -shm files the database file's mode) */
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) close(fd);
    }
    int64_t version = 0;
    bool immutable = false;
    rc = open_handle(d, path, oflags, hot_wal, false, err);
    if (!rc) rc = validate(d, existing, &version, err);
    if ((rc == DB_ERR_READONLY || rc == LLC_ERR_IO) && existing && !hot_wal &&
        !dir_writable(path)) {
        /* A WAL database in a directory we cannot write: SQLite cannot create
         * the -shm file it needs, but with no -wal content to consider the file
         * alone is the database and can be read as immutable. */
        sqlite3_close_v2(d->h);
        d->h = NULL;
        immutable = true;
        rc = open_handle(d, path, SQLITE_OPEN_READONLY, false, true, err);
        if (!rc) rc = validate(d, existing, &version, err);
    }
    if (rc) goto fail;
    if (hot_wal) sqlite3_db_config(d->h, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, (int *)NULL);

    /* Valid: from here on writing is allowed. */
    d->readonly =
        (flags & DB_OPEN_READONLY) || immutable || sqlite3_db_readonly(d->h, "main") == 1;
    if ((rc = set_pragma(d, "PRAGMA foreign_keys = ON", err))) goto fail;
    if (d->readonly) {
        if ((rc = set_pragma(d, "PRAGMA query_only = ON", err))) goto fail;
    } else {
        if ((rc = set_pragma(d, "PRAGMA journal_mode = WAL", err))) goto fail;
        if ((rc = set_pragma(d, "PRAGMA synchronous = NORMAL", err))) goto fail;
    }
    if (version < target) {
        if (d->readonly) {
            rc = dbi_fail(d, err, DB_ERR_READONLY,
                          "database is read-only and needs an upgrade from schema version %lld "
                          "to %d",
                          (long long)version, target);
            goto fail;
        }
        if ((rc = dbi_migrate(d, target, err))) goto fail;
        version = target;
    }
    if (!d->readonly) lock_and_recover(d, recover && version >= 1);
    d->last_code = 0;
    *out = d;
    return 0;

fail:
    db_close(d);
    return rc;
}

int db_open(const char *path, db **out, llc_err *err) {
    return open_impl(path, 0, DB_SCHEMA_VERSION, true, out, err);
}

int db_open_ex(const char *path, unsigned flags, db **out, llc_err *err) {
    return open_impl(path, flags, DB_SCHEMA_VERSION, true, out, err);
}

int db_open_at_version(const char *path, int version, db **out, llc_err *err) {
    if (version < 0 || version > DB_SCHEMA_VERSION) {
        if (out) *out = NULL;
        return llc_fail(err, LLC_ERR_RANGE, "schema version %d is not 0..%d", version,
                        DB_SCHEMA_VERSION);
    }
    return open_impl(path, 0, version, false, out, err);
}

void db_close(db *d) {
    if (!d) return;
    for (int i = 0; i < d->n_cache; i++) sqlite3_finalize(d->cache[i].st);
    if (d->h) sqlite3_close_v2(d->h);
    if (d->lock_fd >= 0) close(d->lock_fd);
    free(d->path);
    free(d);
}

bool db_is_readonly(const db *d) { return d && d->readonly; }
const char *db_path(const db *d) { return d ? d->path : NULL; }
int db_last_errcode(const db *d) { return d ? d->last_code : 0; }
int db_interrupted_at_open(const db *d) { return d ? d->interrupted : 0; }

void db_set_busy_timeout(db *d, int ms) {
    if (d) sqlite3_busy_timeout(d->h, ms < 0 ? 0 : ms);
}

int db_schema_version(db *d) {
    if (!d) return LLC_ERR_RANGE;
    return dbi_user_version(d, NULL);
}
