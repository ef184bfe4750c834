/* db_internal.h — what the storage/db*.c files share: the connection struct, the
 * prepared-statement cache, transactions, and the mapping of SQLite result codes
 * to DB_ERR_* codes and one-line messages. Not for use outside storage/. */
#ifndef LLC_STORAGE_DB_INTERNAL_H
#define LLC_STORAGE_DB_INTERNAL_H

#include <sqlite3.h>

#include "storage/db.h"

/* Room for every static SQL string of storage/ (about 40 today). */
#define DBI_STMT_CACHE 64

struct db {
    sqlite3 *h;
    char *path;
    bool readonly;
    int last_code;     /* code of the last failure (db_last_errcode) */
    int interrupted;   /* messages marked INTERRUPTED at open */
    int lock_fd;       /* flock on PATH-lock: shared while open; -1 when none */
    int n_cache;
    struct {
        const char *sql; /* key: the address of a static SQL string */
        sqlite3_stmt *st;
    } cache[DBI_STMT_CACHE];
};

/* Formats "PATH: message" into err, records code as d's last code, returns it. */
int dbi_fail(db *d, llc_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Maps a SQLite result code: "PATH: <problem> while <what>", returns the code. */
int dbi_sqlfail(db *d, int rc, const char *what, llc_err *err);
/* The llmchat code for a SQLite result code. */
int dbi_code(int rc);

/* A cached prepared statement for the static string sql, reset and with cleared
 * bindings; NULL (error in err) when it cannot be prepared. The caller must
 * sqlite3_reset() it when done so no read transaction stays open. */
sqlite3_stmt *dbi_stmt(db *d, const char *sql, const char *what, llc_err *err);

/* BEGIN IMMEDIATE (DB_ERR_READONLY on a read-only connection), COMMIT (rolls back
 * on failure), ROLLBACK (when a transaction is open). */
int dbi_begin(db *d, const char *what, llc_err *err);
int dbi_commit(db *d, const char *what, llc_err *err);
void dbi_rollback(db *d);

/* Runs one or more statements without results. */
int dbi_exec(db *d, const char *sql, const char *what, llc_err *err);

/* Steps a statement expected to finish without rows (INSERT/UPDATE/DELETE) and
 * resets it. */
int dbi_step_done(db *d, sqlite3_stmt *st, const char *what, llc_err *err);

int64_t dbi_now_ms(void);

/* malloc'ed NUL-terminated copy of a text column ("" for NULL); NULL on OOM. */
char *dbi_col_dup(sqlite3_stmt *st, int col, size_t *len_out);

/* Binds (ptr, len) as text; NULL binds "", DB_NTS means strlen. */
int dbi_bind_text(sqlite3_stmt *st, int idx, const char *s, size_t len);

/* Schema (db_schema.c): the version read from PRAGMA user_version, or a code. */
int dbi_user_version(db *d, llc_err *err);
/* Applies the migrations after the file's version up to target, each in its own
 * transaction (re-reading the version inside it, in case another program
 * migrated meanwhile). */
int dbi_migrate(db *d, int target, llc_err *err);

/* Messages (db_messages.c): reads the columns of DBI_MSG_COLS into *m. */
#define DBI_MSG_COLS                                                                    \
    "m.id, m.session_id, m.parent_id, m.role, m.state, m.content, m.created, "          \
    "m.prompt_tokens, m.cached_tokens, m.completion_tokens, m.ttft_ms, m.tpot_ms, "      \
    "m.finish, m.reasoning, m.reasoning_tokens, m.reasoning_ms"
int dbi_read_message(db *d, sqlite3_stmt *st, db_message *m, llc_err *err);

#endif
