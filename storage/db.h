/* db.h — the chat database (SQLite): sessions, the message tree of each session,
 * UI state (open tabs, settings), full-text search and Markdown export.
 *
 * One `db` is one SQLite connection; use it from one thread at a time (the UI and
 * the server thread each open their own). The file is in WAL mode, so readers and
 * one writer coexist; every write is its own transaction, committed before the
 * call returns.
 *
 * Results follow kernels/common.h: 0 ok, negative error. Every function that can
 * fail takes an `llc_err *` (may be NULL) and writes one line naming the database
 * file and the problem. Besides LLC_ERR_* the DB_ERR_* codes below say what kind
 * of database trouble it was, so a caller can decide to retry (DB_ERR_LOCKED) or
 * to tell the user (the rest). db_last_errcode() repeats the last failure.
 *
 * Strings in returned structs are malloc'ed, NUL-terminated and never NULL after
 * a successful call; free them with the matching *_clear / *_free function.
 * Timestamps are unix milliseconds. Ids are > 0 and never reused; 0 means none. */
#ifndef LLC_STORAGE_DB_H
#define LLC_STORAGE_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/common.h"

/* Database result codes (distinct from LLC_ERR_*, which use -1..-7). */
enum {
    DB_ERR_LOCKED = -20,   /* another connection holds the write lock: retry later */
    DB_ERR_READONLY = -21, /* file, directory or connection is read-only */
    DB_ERR_FULL = -22,     /* disk (or quota) is full */
    DB_ERR_CORRUPT = -23,  /* not a database, or a damaged one */
    DB_ERR_TOO_NEW = -24,  /* written by a newer llmchat (schema version unknown) */
    DB_ERR_FOREIGN = -25,  /* a valid SQLite database of some other program */
};

/* The schema version this build creates and understands (PRAGMA user_version). */
#define DB_SCHEMA_VERSION 5

/* Content length meaning "NUL-terminated string". */
#define DB_NTS ((size_t)-1)

typedef struct db db;

/* Message roles and states; the numbers are stored in the file, never renumber. */
typedef enum { DB_ROLE_SYSTEM = 0, DB_ROLE_USER = 1, DB_ROLE_ASSISTANT = 2 } db_role;
typedef enum {
    DB_STATE_DONE = 0,
    DB_STATE_STREAMING = 1,   /* being generated; left over after a crash -> INTERRUPTED */
    DB_STATE_INTERRUPTED = 2, /* the program died while it streamed */
    DB_STATE_CANCELLED = 3,   /* the user stopped it */
    DB_STATE_ERROR = 4,       /* generation failed */
} db_state;

/* "system"/"user"/"assistant" and "done"/"streaming"/...; "?" when out of range.
 * Static strings. */
const char *db_role_name(int role);
const char *db_state_name(int state);

/* ---- opening ------------------------------------------------------------- */

/* Writes $XDG_DATA_HOME/llmchat/llmchat.db (XDG_DATA_HOME must be absolute), else
 * $HOME/.local/share/llmchat/llmchat.db, into buf, creating missing directories
 * with mode 0700. LLC_ERR_RANGE when buf is too small, LLC_ERR_NOTFOUND when there
 * is no home directory, LLC_ERR_IO when a directory cannot be created. */
int db_default_path(char *buf, size_t n, llc_err *err);

/* Opens or creates the database at path and brings its schema up to
 * DB_SCHEMA_VERSION (each migration in its own transaction). Before anything is
 * written the file is validated (header, schema, PRAGMA quick_check, owner,
 * version); a file that fails is left byte-for-byte untouched:
 *   DB_ERR_CORRUPT  "PATH: not an llmchat database or it is corrupt (file left untouched)"
 *   DB_ERR_FOREIGN  a valid SQLite file of another program
 *   DB_ERR_TOO_NEW  its schema is newer than this build's
 *   DB_ERR_LOCKED   another program holds a lock needed to open or upgrade it
 *   DB_ERR_READONLY read-only and needs an upgrade (or cannot be read at all)
 * A file that can be read but not written opens read-only (db_is_readonly).
 * Assistant messages left STREAMING by a crashed program are marked INTERRUPTED,
 * but only when no other llmchat connection has the file open: every writable
 * connection holds a shared flock(2) on the file "PATH-lock" (created next to the
 * database and left there), and recovery needs it exclusively.
 * On success *out must be closed with db_close; on failure *out is NULL. */
int db_open(const char *path, db **out, llc_err *err);

enum { DB_OPEN_READONLY = 1 }; /* flags for db_open_ex */

/* db_open with flags: DB_OPEN_READONLY opens without ever writing (no migration,
 * no crash recovery; a database that needs an upgrade is DB_ERR_READONLY). */
int db_open_ex(const char *path, unsigned flags, db **out, llc_err *err);

/* For tests: like db_open but migrates only up to `version` (0..DB_SCHEMA_VERSION)
 * and does no crash recovery, so a test can write data at an old schema and
 * prove that db_open upgrades it. A file already past `version` is not changed. */
int db_open_at_version(const char *path, int version, db **out, llc_err *err);

/* Closes the connection (finalizes cached statements). NULL is a no-op. */
void db_close(db *d);

bool db_is_readonly(const db *d);
/* The path given to db_open (owned by d). */
const char *db_path(const db *d);
/* PRAGMA user_version of the open file; negative code on error. */
int db_schema_version(db *d);
/* The code returned by the last failing call on d (0 if none failed yet). */
int db_last_errcode(const db *d);
/* How many STREAMING messages db_open marked INTERRUPTED. */
int db_interrupted_at_open(const db *d);
/* How long a write waits for another connection's lock before DB_ERR_LOCKED
 * (default 2000 ms). */
void db_set_busy_timeout(db *d, int ms);

/* ---- sessions ------------------------------------------------------------ */

typedef struct db_session {
    int64_t id;
    char *title;
    char *system_prompt; /* "" when none */
    char *model;         /* "" when none */
    char *params_json;   /* sampling parameters as JSON, opaque here; "" when none */
    int64_t created, updated;
    bool archived;
    int64_t active_leaf; /* last message of the active path, 0 = none */
} db_session;

/* Creates a session (NULL strings are stored as ""); *id_out gets its id. */
int db_session_create(db *d, const char *title, const char *system_prompt, const char *model,
                      const char *params_json, int64_t *id_out, llc_err *err);
/* Fills *out (clear it with db_session_clear). LLC_ERR_NOTFOUND if there is none. */
int db_session_get(db *d, int64_t id, db_session *out, llc_err *err);
/* All sessions, most recently updated first; archived ones only when asked.
 * *out is a malloc'ed array of *n (NULL when 0): free with db_sessions_free. */
int db_session_list(db *d, bool include_archived, db_session **out, int *n, llc_err *err);
/* Setters: LLC_ERR_NOTFOUND if the session does not exist. They do not change
 * `updated` (only new messages, finished answers and db_session_touch do). */
int db_session_set_title(db *d, int64_t id, const char *title, llc_err *err);
int db_session_set_system(db *d, int64_t id, const char *system_prompt, llc_err *err);
int db_session_set_model(db *d, int64_t id, const char *model, llc_err *err);
int db_session_set_params(db *d, int64_t id, const char *params_json, llc_err *err);
int db_session_set_archived(db *d, int64_t id, bool archived, llc_err *err);
/* leaf must be 0 or a message of this session (else LLC_ERR_NOTFOUND). */
int db_session_set_active_leaf(db *d, int64_t id, int64_t leaf, llc_err *err);
/* Sets `updated` to now. */
int db_session_touch(db *d, int64_t id, llc_err *err);
/* Deletes the session, its messages and its tab. LLC_ERR_NOTFOUND if none. */
int db_session_delete(db *d, int64_t id, llc_err *err);
/* Frees the strings of *s and zeroes it; NULL is a no-op. */
void db_session_clear(db_session *s);
/* Clears and frees an array from db_session_list; NULL is a no-op. */
void db_sessions_free(db_session *arr, int n);

/* ---- messages: a tree per session ---------------------------------------- */

typedef struct db_usage {
    int64_t prompt_tokens, cached_tokens, completion_tokens;
    double ttft_ms, tpot_ms;
    int64_t reasoning_tokens; /* a thinking model's: the tokens of its reasoning (of completion_tokens) */
    double reasoning_ms;      /* and how long the reasoning streamed */
} db_usage;

typedef struct db_message {
    int64_t id, session_id;
    int64_t parent_id; /* 0 for a root */
    int role;          /* db_role */
    int state;         /* db_state */
    char *content;     /* NUL-terminated copy; may also contain NULs: use content_len */
    size_t content_len;
    int64_t created;
    db_usage usage;
    char *finish;      /* finish reason ("stop", "length", ...), "" when none */
    char *reasoning;   /* a thinking model's reasoning before the answer, "" when none */
    size_t reasoning_len;
} db_message;

/* Adds a message under parent_id (0 = a new root) of session_id; content is len
 * bytes (DB_NTS: NUL-terminated; NULL = empty). Also sets the session's `updated`
 * to now and its active_leaf to the new message. *id_out (may be NULL) gets the id.
 * LLC_ERR_NOTFOUND when the session or the parent (in that session) does not
 * exist, LLC_ERR_RANGE for a bad role or state. */
int db_message_add(db *d, int64_t session_id, int64_t parent_id, int role, const char *content,
                   size_t len, int state, int64_t *id_out, llc_err *err);
/* Replaces the content and state (called about once a second while an answer
 * streams; each call is committed). LLC_ERR_NOTFOUND when there is no such message. */
int db_message_set_content(db *d, int64_t id, const char *content, size_t len, int state,
                           llc_err *err);
/* Replaces an answer's reasoning (stored beside its content).
 * LLC_ERR_NOTFOUND when there is no such message. */
int db_message_set_reasoning(db *d, int64_t id, const char *reasoning, size_t len, llc_err *err);
/* Final content (NULL: keep the stored one), state, usage (NULL: zeros) and finish
 * reason (NULL: ""); also touches the session. */
int db_message_finish(db *d, int64_t id, const char *content, size_t len, int state,
                      const db_usage *usage, const char *finish, llc_err *err);
/* Fills *out (clear with db_message_clear). LLC_ERR_NOTFOUND if there is none. */
int db_message_get(db *d, int64_t id, db_message *out, llc_err *err);
/* The path root -> leaf_id in order: *out malloc'ed array of *n (leaf 0: empty).
 * Free with db_messages_free. LLC_ERR_NOTFOUND when leaf_id does not exist. */
int db_message_path(db *d, int64_t leaf_id, db_message **out, int *n, llc_err *err);
/* The children of parent_id (0: the roots of session_id; session_id is only used
 * then), i.e. the alternatives at that point, oldest first (created, then id).
 * *out malloc'ed (NULL when *n is 0): free with db_messages_free. */
int db_message_children(db *d, int64_t session_id, int64_t parent_id, db_message **out, int *n,
                        llc_err *err);
/* From message_id follows the most recent child down to a leaf (message_id itself
 * when it has no children): what to show when switching to that branch. */
int db_message_latest_leaf(db *d, int64_t message_id, int64_t *leaf_out, llc_err *err);
/* Deletes a message and everything below it. If the session's active leaf was in
 * that subtree, the active leaf moves to the latest leaf under the deleted
 * message's parent (or of the session's latest root; 0 when none is left). */
int db_message_delete(db *d, int64_t id, llc_err *err);
void db_message_clear(db_message *m);
void db_messages_free(db_message *arr, int n);

/* ---- UI state ------------------------------------------------------------ */

/* Replaces the saved tabs with session_ids[0..n) in that order; active_index is
 * the active tab (-1: none). Ids of sessions that no longer exist are skipped. */
int db_tabs_save(db *d, const int64_t *session_ids, int n, int active_index, llc_err *err);
/* Loads the saved tabs: *ids_out malloc'ed (free()), NULL when *n is 0;
 * *active_index is the active tab or -1. Tabs of deleted sessions are gone. */
int db_tabs_load(db *d, int64_t **ids_out, int *n, int *active_index, llc_err *err);
/* Stores value under key; value NULL removes the key. */
int db_setting_set(db *d, const char *key, const char *value, llc_err *err);
/* *value_out gets a malloc'ed copy (free()), or NULL when the key is not set;
 * both are success (0). */
int db_setting_get(db *d, const char *key, char **value_out, llc_err *err);

/* ---- search and export --------------------------------------------------- */

typedef struct db_hit {
    int64_t session_id, message_id;
    int role;
    char *title;   /* the session's title */
    char *snippet; /* a few words around the match, matches inside "[" "]" */
    bool in_reasoning; /* the words matched in the message's reasoning, not its text
                          (the snippet is the reasoning's) */
} db_hit;

/* Full-text search over message content and reasoning, best match first, at most limit hits
 * (<= 0: 50). The query is plain words: every word must occur (FTS5 syntax in it
 * is taken literally; a trailing * makes a word a prefix). Messages still
 * streaming are not indexed until they finish. *out malloc'ed (NULL when *n is
 * 0): free with db_hits_free. */
int db_search(db *d, const char *query, int limit, db_hit **out, int *n, llc_err *err);
void db_hits_free(db_hit *arr, int n);

/* Writes the path root -> leaf of the session (leaf 0: its active leaf) as
 * Markdown: the title as a heading, the system prompt, then each message under a
 * "**User**" / "**Assistant**" header (a reasoning quoted before its answer).
 * LLC_ERR_IO when writing to f fails. */
int db_export_markdown(db *d, int64_t session_id, int64_t leaf, FILE *f, llc_err *err);
/* A thinking model's reasoning as the exports quote it before its answer (also
 * conv_write_markdown's). */
void db_markdown_reasoning(FILE *f, const char *s, size_t n);

#endif
