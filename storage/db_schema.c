/* db_schema.c — the schema as an ordered list of forward migrations. Version N is
 * reached by applying migrations 1..N in order; PRAGMA user_version records the
 * version and each migration runs in its own transaction. Never edit a migration
 * that has shipped: add a new one (and bump DB_SCHEMA_VERSION in db.h). */
#include "storage/db_internal.h"

#include <stdio.h>

/* Message states are stored as numbers (db_state); 1 = STREAMING. */
static const char *const MIGRATIONS[DB_SCHEMA_VERSION + 1] = {
    [0] = "",

    /* v1: sessions and the message tree. A message's parent is in the same
     * session and was added before it (parent_id < id). Ids are AUTOINCREMENT so
     * an id remembered by the UI never comes back as another message. parent_id
     * has no ON DELETE action: subtrees are deleted explicitly in one statement
     * (a cascade down a long conversation would recurse once per message). */
    [1] = "PRAGMA application_id = 1819045219;" /* 0x6c6c6d63 "llmc" */
          "CREATE TABLE sessions("
          "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
          "  title TEXT NOT NULL DEFAULT '',"
          "  created INTEGER NOT NULL,"
          "  updated INTEGER NOT NULL,"
          "  system_prompt TEXT NOT NULL DEFAULT '',"
          "  model TEXT NOT NULL DEFAULT '',"
          "  params_json TEXT NOT NULL DEFAULT '',"
          "  archived INTEGER NOT NULL DEFAULT 0,"
          "  active_leaf INTEGER NOT NULL DEFAULT 0);"
          "CREATE INDEX sessions_by_updated ON sessions(archived, updated);"
          "CREATE TABLE messages("
          "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
          "  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
          "  parent_id INTEGER REFERENCES messages(id),"
          "  role INTEGER NOT NULL,"
          "  state INTEGER NOT NULL DEFAULT 0,"
          "  content TEXT NOT NULL DEFAULT '',"
          "  created INTEGER NOT NULL,"
          "  prompt_tokens INTEGER NOT NULL DEFAULT 0,"
          "  cached_tokens INTEGER NOT NULL DEFAULT 0,"
          "  completion_tokens INTEGER NOT NULL DEFAULT 0,"
          "  ttft_ms REAL NOT NULL DEFAULT 0,"
          "  tpot_ms REAL NOT NULL DEFAULT 0,"
          "  finish TEXT NOT NULL DEFAULT '');"
          "CREATE INDEX messages_by_parent ON messages(parent_id, created, id);"
          "CREATE INDEX messages_by_session ON messages(session_id, parent_id, created, id);"
          "CREATE INDEX messages_streaming ON messages(state) WHERE state = 1;",

    /* v2: full-text index over message content (external content: the text lives
     * once, in messages). A message is indexed while it is not STREAMING, so an
     * answer being written is not re-indexed every second; the triggers keep the
     * index equal to exactly that set (FTS5 'delete' needs the indexed text). */
    [2] = "CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages',"
          "  content_rowid='id', tokenize='unicode61 remove_diacritics 2');"
          "INSERT INTO messages_fts(rowid, content)"
          "  SELECT id, content FROM messages WHERE state <> 1;"
          "CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages WHEN new.state <> 1 BEGIN"
          "  INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);"
          "END;"
          "CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages WHEN old.state <> 1 BEGIN"
          "  INSERT INTO messages_fts(messages_fts, rowid, content)"
          "    VALUES ('delete', old.id, old.content);"
          "END;"
          "CREATE TRIGGER messages_fts_au AFTER UPDATE OF content, state ON messages BEGIN"
          "  INSERT INTO messages_fts(messages_fts, rowid, content)"
          "    SELECT 'delete', old.id, old.content WHERE old.state <> 1;"
          "  INSERT INTO messages_fts(rowid, content)"
          "    SELECT new.id, new.content WHERE new.state <> 1;"
          "END;",

    /* v3: UI state: the open tabs in order (one marked active) and settings. */
    [3] = "CREATE TABLE tabs("
          "  position INTEGER PRIMARY KEY,"
          "  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
          "  active INTEGER NOT NULL DEFAULT 0);"
          "CREATE INDEX tabs_by_session ON tabs(session_id);"
          "CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;",

    /* v4: a thinking model's reasoning, kept apart from the answer's content (the
     * prompt of later turns leaves it out; the view folds it). */
    [4] = "ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT '';",

    /* v5: the reasoning's size and time (the chat's "thought for 4.2 s, 312
     * tokens"), and the reasoning in the full-text index as a second column, so
     * a search finds words a model only thought (the hit says so). The index is
     * rebuilt: an external-content FTS5 table cannot gain a column. */
    [5] = "ALTER TABLE messages ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;"
          "ALTER TABLE messages ADD COLUMN reasoning_ms REAL NOT NULL DEFAULT 0;"
          "DROP TRIGGER messages_fts_ai;"
          "DROP TRIGGER messages_fts_ad;"
          "DROP TRIGGER messages_fts_au;"
          "DROP TABLE messages_fts;"
          "CREATE VIRTUAL TABLE messages_fts USING fts5(content, reasoning, content='messages',"
          "  content_rowid='id', tokenize='unicode61 remove_diacritics 2');"
          "INSERT INTO messages_fts(rowid, content, reasoning)"
          "  SELECT id, content, reasoning FROM messages WHERE state <> 1;"
          "CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages WHEN new.state <> 1 BEGIN"
          "  INSERT INTO messages_fts(rowid, content, reasoning) VALUES (new.id, new.content, new.reasoning);"
          "END;"
          "CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages WHEN old.state <> 1 BEGIN"
          "  INSERT INTO messages_fts(messages_fts, rowid, content, reasoning)"
          "    VALUES ('delete', old.id, old.content, old.reasoning);"
          "END;"
          "CREATE TRIGGER messages_fts_au AFTER UPDATE OF content, state, reasoning ON messages BEGIN"
          "  INSERT INTO messages_fts(messages_fts, rowid, content, reasoning)"
          "    SELECT 'delete', old.id, old.content, old.reasoning WHERE old.state <> 1;"
          "  INSERT INTO messages_fts(rowid, content, reasoning)"
          "    SELECT new.id, new.content, new.reasoning WHERE new.state <> 1;"
          "END;",
};

static const char SQL_USER_VERSION[] = "PRAGMA user_version";

int dbi_user_version(db *d, llc_err *err) {
    sqlite3_stmt *st = dbi_stmt(d, SQL_USER_VERSION, "reading the schema version", err);
    if (!st) return d->last_code;
    int rc = sqlite3_step(st);
    int v = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_reset(st);
    if (rc != SQLITE_ROW) return dbi_sqlfail(d, rc, "reading the schema version", err);
    return v < 0 ? 0 : v;
}

int dbi_migrate(db *d, int target, llc_err *err) {
    LLC_ASSERT(target >= 0 && target <= DB_SCHEMA_VERSION);
    for (;;) {
        char what[64];
        snprintf(what, sizeof what, "upgrading the database schema");
        int rc = dbi_begin(d, what, err);
        if (rc) return rc;
        int v = dbi_user_version(d, err);
        if (v < 0) {
            dbi_rollback(d);
            return v;
        }
        if (v >= target) return dbi_commit(d, what, err);
        snprintf(what, sizeof what, "upgrading the database schema to version %d", v + 1);
        char set_version[48];
        snprintf(set_version, sizeof set_version, "PRAGMA user_version = %d", v + 1);
        rc = dbi_exec(d, MIGRATIONS[v + 1], what, err);
        if (!rc) rc = dbi_exec(d, set_version, what, err);
        if (!rc) rc = dbi_commit(d, what, err);
        if (rc) {
            dbi_rollback(d);
            return rc;
        }
    }
}
