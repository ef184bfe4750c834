/* test_storage.c — the chat database: schema and every forward migration, files
 * that must be refused and left byte-for-byte untouched (garbage, truncated,
 * damaged, foreign, too new), sessions, the message tree, crash recovery of a
 * streaming answer (a child killed with SIGKILL), full-text search with hostile
 * input, tabs and settings, Markdown export, read-only and locked databases,
 * a full disk, and a 10 MiB message. */
#include "storage/db.h"
#include "storage/db_internal.h"
#include "tests/test.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char g_dir[64];

static const char *tpath(const char *name) {
    static char buf[8][256];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", g_dir, name);
    return b;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static bool side_files_absent(const char *path) {
    char p[300];
    snprintf(p, sizeof p, "%s-wal", path);
    bool ok = !exists(p);
    snprintf(p, sizeof p, "%s-shm", path);
    ok = ok && !exists(p);
    snprintf(p, sizeof p, "%s-lock", path);
    return ok && !exists(p);
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(data, 1, n, f) == n);
    fclose(f);
}

/* The file still holds exactly data[0..n). */
static bool same_bytes(const char *path, const char *data, size_t n) {
    size_t len = 0;
    char *now = t_read_file(path, &len);
    bool same = now && len == n && memcmp(now, data, n) == 0;
    free(now);
    return same;
}

/* Runs SQL on a plain SQLite connection (not ours). */
static int raw_exec(const char *path, const char *sql) {
    sqlite3 *h;
    int rc = sqlite3_open(path, &h);
    if (rc == SQLITE_OK) rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
    sqlite3_close(h);
    return rc;
}

static int64_t raw_int(sqlite3 *h, const char *sql) {
    sqlite3_stmt *st;
    int64_t v = -1;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static db *open_ok(const char *path) {
    db *d = NULL;
    llc_err e = {{0}};
    int rc = db_open(path, &d, &e);
    CHECKF(rc == 0 && d, "db_open %s: %d %s", path, rc, e.msg);
    return d;
}

static int64_t add_msg(db *d, int64_t sid, int64_t parent, int role, const char *text) {
    int64_t id = 0;
    llc_err e = {{0}};
    int rc = db_message_add(d, sid, parent, role, text, DB_NTS, DB_STATE_DONE, &id, &e);
    CHECKF(rc == 0 && id > 0, "add: %d %s", rc, e.msg);
    return id;
}

static int64_t new_session(db *d, const char *title) {
    int64_t id = 0;
    llc_err e = {{0}};
    int rc = db_session_create(d, title, NULL, NULL, NULL, &id, &e);
    CHECKF(rc == 0 && id > 0, "session_create: %d %s", rc, e.msg);
    return id;
}

static int search_count(db *d, const char *q) {
    db_hit *h = NULL;
    int n = -1;
    llc_err e = {{0}};
    int rc = db_search(d, q, 0, &h, &n, &e);
    CHECKF(rc == 0, "search '%s': %d %s", q, rc, e.msg);
    db_hits_free(h, n);
    return rc ? -1 : n;
}

static void sleep_ms(int ms) { nanosleep(&(struct timespec){0, ms * 1000000L}, NULL); }

/* ---- tests ---------------------------------------------------------------- */

/* A database the program creates holds conversations: 0600, its WAL too,
 * whatever the umask. */
static void test_new_files_private(void) {
    const char *p = tpath("private.db");
    mode_t old = umask(022);
    db *d = open_ok(p);
    umask(old);
    if (!d) return;
    int64_t sid = new_session(d, "secret");
    add_msg(d, sid, 0, DB_ROLE_USER, "my password is hunter2");
    struct stat st;
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
    char wal[300];
    snprintf(wal, sizeof wal, "%s-wal", p);
    CHECKF(stat(wal, &st) == 0 && (st.st_mode & 0777) == 0600, "the WAL is %o", (unsigned)(st.st_mode & 0777));
    db_close(d);
}

static void test_default_path(void) {
    char buf[512], want[512];
    llc_err e = {{0}};
    char *old_xdg = getenv("XDG_DATA_HOME") ? strdup(getenv("XDG_DATA_HOME")) : NULL;
    char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;

    setenv("XDG_DATA_HOME", tpath("xdg/data"), 1);
    CHECKF(db_default_path(buf, sizeof buf, &e) == 0, "%s", e.msg);
    snprintf(want, sizeof want, "%s/xdg/data/llmchat/llmchat.db", g_dir);
    CHECKF(!strcmp(buf, want), "%s", buf);
    struct stat st;
    CHECK(stat(tpath("xdg/data/llmchat"), &st) == 0 && S_ISDIR(st.st_mode) &&
          (st.st_mode & 0777) == 0700);

    setenv("XDG_DATA_HOME", "relative/ignored", 1);
    setenv("HOME", tpath("home"), 1);
    CHECKF(db_default_path(buf, sizeof buf, &e) == 0, "%s", e.msg);
    snprintf(want, sizeof want, "%s/home/.local/share/llmchat/llmchat.db", g_dir);
    CHECKF(!strcmp(buf, want), "%s", buf);
    CHECK(exists(tpath("home/.local/share/llmchat")));
    CHECK(db_default_path(buf, 10, &e) == LLC_ERR_RANGE);

    if (old_xdg) setenv("XDG_DATA_HOME", old_xdg, 1);
    else unsetenv("XDG_DATA_HOME");
    if (old_home) setenv("HOME", old_home, 1);
    else unsetenv("HOME");
    free(old_xdg);
    free(old_home);
}

static void test_schema_latest(void) {
    const char *p = tpath("latest.db");
    db *d = open_ok(p);
    if (!d) return;
    CHECK(db_schema_version(d) == DB_SCHEMA_VERSION);
    CHECK(!db_is_readonly(d));
    CHECK(!strcmp(db_path(d), p));
    CHECK(raw_int(d->h, "PRAGMA foreign_keys") == 1);
    CHECK(raw_int(d->h, "PRAGMA synchronous") == 1); /* NORMAL */
    CHECK(raw_int(d->h, "PRAGMA application_id") == 0x6c6c6d63);
    CHECK(raw_int(d->h, "SELECT count(*) FROM sqlite_master WHERE name IN ('sessions',"
                        "'messages','messages_fts','tabs','settings')") == 5);
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(d->h, "PRAGMA journal_mode", -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW &&
          !strcmp((const char *)sqlite3_column_text(st, 0), "wal"));
    sqlite3_finalize(st);
    db_close(d);
    db_close(NULL);
    /* reopening changes nothing */
    d = open_ok(p);
    CHECK(d && db_schema_version(d) == DB_SCHEMA_VERSION);
    db_close(d);
}

/* Writes data at schema version v (needs v >= 1): a session with a branch and
 * a message left STREAMING. */
static void fill_old(db *d, int v, int64_t ids[5]) {
    llc_err e = {{0}};
    CHECKF(db_session_create(d, "old chat", "be brief", "m1", "{\"t\":0.5}", &ids[0], &e) == 0,
           "v%d: %s", v, e.msg);
    ids[1] = add_msg(d, ids[0], 0, DB_ROLE_USER, "what is a platypus");
    ids[2] = add_msg(d, ids[0], ids[1], DB_ROLE_ASSISTANT, "a monotreme from australia");
    ids[3] = add_msg(d, ids[0], ids[1], DB_ROLE_ASSISTANT, "an egg laying mammal");
    CHECK(db_message_add(d, ids[0], ids[3], DB_ROLE_USER, "and echidna", DB_NTS,
                         DB_STATE_STREAMING, &ids[4], &e) == 0);
}

static void test_migrations_from_every_version(void) {
    for (int v = 0; v < DB_SCHEMA_VERSION; v++) {
        char name[32];
        snprintf(name, sizeof name, "mig%d.db", v);
        const char *p = tpath(name);
        db *d = NULL;
        llc_err e = {{0}};
        CHECKF(db_open_at_version(p, v, &d, &e) == 0, "v%d: %s", v, e.msg);
        if (!d) continue;
        CHECK(db_schema_version(d) == v);
        int64_t ids[5] = {0};
        if (v >= 1) fill_old(d, v, ids);
        if (v >= 1 && v < 3) { /* tabs arrive in v3 */
            int64_t t = ids[0];
            CHECK(db_tabs_save(d, &t, 1, 0, &e) != 0);
        }
        db_close(d);

        d = open_ok(p);
        if (!d) continue;
        CHECKF(db_schema_version(d) == DB_SCHEMA_VERSION, "v%d", v);
        if (v >= 1) {
            db_session s;
            CHECK(db_session_get(d, ids[0], &s, &e) == 0);
            CHECK(s.title && !strcmp(s.title, "old chat") && !strcmp(s.system_prompt, "be brief") &&
                  !strcmp(s.model, "m1") && !strcmp(s.params_json, "{\"t\":0.5}"));
            CHECK(s.active_leaf == ids[4]);
            db_session_clear(&s);
            db_message *path = NULL;
            int n = 0;
            CHECK(db_message_path(d, ids[4], &path, &n, &e) == 0 && n == 3);
            if (n == 3) {
                CHECK(path[0].id == ids[1] && path[1].id == ids[3] && path[2].id == ids[4]);
                CHECK(!strcmp(path[1].content, "an egg laying mammal"));
                CHECK(path[2].state == DB_STATE_INTERRUPTED); /* recovered at open */
            }
            if (n == 3) CHECK(path[1].reasoning && !path[1].reasoning[0]); /* v4: none yet */
            if (n == 3) CHECK(path[1].usage.reasoning_tokens == 0 && path[1].usage.reasoning_ms == 0); /* v5 */
            CHECKF(v < 2 || search_count(d, "monotreme") == 1, "v%d: the rebuilt index keeps old text", v);
            db_messages_free(path, n);
            /* the FTS index was built from the old rows */
            CHECK(search_count(d, "platypus") == 1);
            CHECK(search_count(d, "mammal") == 1);
            CHECK(search_count(d, "echidna") == 1);
        }
        int64_t sid = new_session(d, "new");
        CHECK(db_tabs_save(d, &sid, 1, 0, &e) == 0);
        CHECK(db_setting_set(d, "k", "v", &e) == 0);
        db_close(d);
    }
}

static void test_too_new_refused(void) {
    const char *p = tpath("new.db");
    db *d = open_ok(p);
    if (!d) return;
    new_session(d, "from the future");
    db_close(d);
    CHECK(raw_exec(p, "PRAGMA user_version = 99") == SQLITE_OK);
    size_t n;
    char *before = t_read_file(p, &n);
    CHECK(before != NULL);
    llc_err e = {{0}};
    d = (db *)1;
    int rc = db_open(p, &d, &e);
    CHECKF(rc == DB_ERR_TOO_NEW && d == NULL, "%d %s", rc, e.msg);
    CHECKF(strstr(e.msg, p) && strstr(e.msg, "newer") && strstr(e.msg, "99"), "%s", e.msg);
    CHECK(before && same_bytes(p, before, n));
    char side[300];
    snprintf(side, sizeof side, "%s-wal", p);
    CHECK(!exists(side));
    snprintf(side, sizeof side, "%s-shm", p);
    CHECK(!exists(side));
    free(before);
}

/* Opening must fail with DB_ERR_CORRUPT and the message, leaving the bytes. */
static void expect_refused(const char *p, int want, const char *what) {
    size_t n = 0;
    char *before = t_read_file(p, &n);
    CHECK(before != NULL);
    llc_err e = {{0}};
    db *d = NULL;
    int rc = db_open(p, &d, &e);
    CHECKF(rc == want && d == NULL, "%s: rc %d: %s", what, rc, e.msg);
    db_close(d);
    if (want == DB_ERR_CORRUPT)
        CHECKF(strstr(e.msg, p) &&
                   strstr(e.msg, "not an llmchat database or it is corrupt (file left untouched"),
               "%s: %s", what, e.msg);
    CHECKF(!strstr(e.msg, "btree") && !strstr(e.msg, "error code"), "%s: SQLite's words: %s", what, e.msg);
    CHECKF(before && same_bytes(p, before, n), "%s: file changed", what);
    CHECKF(side_files_absent(p), "%s: side files left", what);
    free(before);
}

static void test_bad_files_refused_untouched(void) {
    /* 4096 random bytes */
    char junk[4096];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof junk; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        junk[i] = (char)(x >> 56);
    }
    write_file(tpath("junk.db"), junk, sizeof junk);
    expect_refused(tpath("junk.db"), DB_ERR_CORRUPT, "random bytes");
    write_file(tpath("text.db"), "hello\n", 6);
    expect_refused(tpath("text.db"), DB_ERR_CORRUPT, "text file");

    /* a real database with some pages */
    const char *good = tpath("good.db");
    db *d = open_ok(good);
    if (!d) return;
    int64_t sid = new_session(d, "real");
    char big[3000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = 0;
    int64_t parent = 0;
    for (int i = 0; i < 40; i++) parent = add_msg(d, sid, parent, DB_ROLE_USER, big);
    db_close(d);
    size_t n = 0;
    char *img = t_read_file(good, &n);
    CHECK(img && n > 8 * 4096);
    if (!img) return;
    uint32_t page = ((unsigned char)img[16] << 8) | (unsigned char)img[17];
    if (page == 1) page = 65536;

    write_file(tpath("trunc.db"), img, n / 2 + 100);
    expect_refused(tpath("trunc.db"), DB_ERR_CORRUPT, "truncated");

    char *bad = malloc(n);
    memcpy(bad, img, n);
    for (int i = 0; i < 16; i++) bad[i] ^= 0x5a; /* the magic string */
    write_file(tpath("hdr.db"), bad, n);
    expect_refused(tpath("hdr.db"), DB_ERR_CORRUPT, "flipped header");

    memcpy(bad, img, n);
    for (uint32_t pg = 1; pg < n / page; pg++) /* every b-tree page's header */
        memset(bad + (size_t)pg * page, 0xff, 8);
    write_file(tpath("pages.db"), bad, n);
    expect_refused(tpath("pages.db"), DB_ERR_CORRUPT, "flipped pages");

    memcpy(bad, img, n);
    memset(bad + 2 * (size_t)page, 0xa5, 8); /* one page's header */
    write_file(tpath("page3.db"), bad, n);
    expect_refused(tpath("page3.db"), DB_ERR_CORRUPT, "one damaged page");
    llc_err e3 = {{0}};
    db *d3 = NULL;
    CHECK(db_open(tpath("page3.db"), &d3, &e3) == DB_ERR_CORRUPT);
    CHECKF(strstr(e3.msg, "its pages are damaged: move it aside"), "%s", e3.msg);
    free(bad);
    free(img);

    /* a valid SQLite database of another program */
    CHECK(raw_exec(tpath("other.db"), "CREATE TABLE t(x); INSERT INTO t VALUES(1)") == 0);
    expect_refused(tpath("other.db"), DB_ERR_FOREIGN, "foreign database");
    CHECK(raw_exec(tpath("other2.db"), "PRAGMA user_version = 2; CREATE TABLE sessions(x)") == 0);
    expect_refused(tpath("other2.db"), DB_ERR_FOREIGN, "foreign database with a version");

    /* not openable at all */
    llc_err e = {{0}};
    d = NULL;
    CHECK(db_open(tpath("no/such/dir/x.db"), &d, &e) == LLC_ERR_IO && !d);
    CHECKF(strstr(e.msg, "cannot open"), "%s", e.msg);
    CHECK(db_open(g_dir, &d, &e) == LLC_ERR_IO && !d);
    CHECK(db_open(NULL, &d, &e) == LLC_ERR_RANGE && !d);
}

static void test_sessions(void) {
    db *d = open_ok(tpath("sessions.db"));
    if (!d) return;
    llc_err e = {{0}};
    int64_t a = 0, b, c;
    CHECK(db_session_create(d, "alpha", "sys", "model-a", "{\"temp\":0.7}", &a, &e) == 0);
    sleep_ms(3);
    b = new_session(d, "beta");
    sleep_ms(3);
    c = new_session(d, NULL);
    CHECK(a > 0 && b > a && c > b);

    db_session s;
    CHECK(db_session_get(d, a, &s, &e) == 0);
    CHECK(s.id == a && !strcmp(s.title, "alpha") && !strcmp(s.system_prompt, "sys") &&
          !strcmp(s.model, "model-a") && !strcmp(s.params_json, "{\"temp\":0.7}") &&
          !s.archived && s.active_leaf == 0 && s.created > 0 && s.updated == s.created);
    db_session_clear(&s);
    CHECK(db_session_get(d, c, &s, &e) == 0 && !strcmp(s.title, "") && !strcmp(s.model, ""));
    db_session_clear(&s);
    CHECK(db_session_get(d, 999, &s, &e) == LLC_ERR_NOTFOUND && s.title == NULL);
    CHECK(db_last_errcode(d) == LLC_ERR_NOTFOUND);

    db_session *list = NULL;
    int n = 0;
    CHECK(db_session_list(d, false, &list, &n, &e) == 0 && n == 3);
    if (n == 3) CHECK(list[0].id == c && list[1].id == b && list[2].id == a);
    db_sessions_free(list, n);

    sleep_ms(3);
    CHECK(db_session_touch(d, a, &e) == 0);
    CHECK(db_session_set_title(d, b, "beta 2", &e) == 0);
    CHECK(db_session_set_system(d, b, "you are terse", &e) == 0);
    CHECK(db_session_set_model(d, b, "model-b", &e) == 0);
    CHECK(db_session_set_params(d, b, "{}", &e) == 0);
    CHECK(db_session_set_archived(d, c, true, &e) == 0);
    CHECK(db_session_set_title(d, 999, "x", &e) == LLC_ERR_NOTFOUND);
    CHECKF(strstr(e.msg, "no session 999"), "%s", e.msg);
    CHECK(db_session_set_active_leaf(d, a, 12345, &e) == LLC_ERR_NOTFOUND);

    CHECK(db_session_list(d, false, &list, &n, &e) == 0 && n == 2);
    if (n == 2) {
        CHECK(list[0].id == a && list[1].id == b);
        CHECK(!strcmp(list[1].title, "beta 2") && !strcmp(list[1].system_prompt, "you are terse") &&
              !strcmp(list[1].model, "model-b") && !strcmp(list[1].params_json, "{}"));
    }
    db_sessions_free(list, n);
    CHECK(db_session_list(d, true, &list, &n, &e) == 0 && n == 3);
    if (n == 3) CHECK(list[0].id == a && list[1].id == c && list[1].archived && !list[0].archived);
    db_sessions_free(list, n);

    /* delete cascades to messages */
    int64_t m1 = add_msg(d, b, 0, DB_ROLE_USER, "bye");
    CHECK(db_session_delete(d, b, &e) == 0);
    CHECK(db_session_get(d, b, &s, &e) == LLC_ERR_NOTFOUND);
    db_message m;
    CHECK(db_message_get(d, m1, &m, &e) == LLC_ERR_NOTFOUND);
    CHECK(db_session_delete(d, b, &e) == LLC_ERR_NOTFOUND);
    db_session_clear(NULL);
    db_sessions_free(NULL, 0);
    db_message_clear(NULL);
    db_messages_free(NULL, 0);
    db_hits_free(NULL, 0);
    db_close(d);
}

static void test_message_tree(void) {
    const char *p = tpath("tree.db");
    db *d = open_ok(p);
    if (!d) return;
    llc_err e = {{0}};
    int64_t sid = new_session(d, "tree");
    int64_t other = new_session(d, "other");
    db_session s0;
    CHECK(db_session_get(d, sid, &s0, &e) == 0);
    sleep_ms(3);
    int64_t u1 = add_msg(d, sid, 0, DB_ROLE_USER, "question");
    int64_t a1 = add_msg(d, sid, u1, DB_ROLE_ASSISTANT, "answer one");
    int64_t a2 = add_msg(d, sid, u1, DB_ROLE_ASSISTANT, "answer two"); /* an alternative */
    int64_t u2 = add_msg(d, sid, a1, DB_ROLE_USER, "follow-up");
    int64_t a3 = add_msg(d, sid, u2, DB_ROLE_ASSISTANT, "deeper");
    db_session s;
    CHECK(db_session_get(d, sid, &s, &e) == 0 && s.active_leaf == a3 && s.updated > s0.updated);
    db_session_clear(&s);
    db_session_clear(&s0);

    db_message *arr = NULL;
    int n = 0;
    CHECK(db_message_children(d, sid, u1, &arr, &n, &e) == 0 && n == 2);
    if (n == 2) CHECK(arr[0].id == a1 && arr[1].id == a2 && !strcmp(arr[1].content, "answer two") &&
                      arr[1].parent_id == u1 && arr[1].role == DB_ROLE_ASSISTANT);
    db_messages_free(arr, n);
    CHECK(db_message_children(d, sid, 0, &arr, &n, &e) == 0 && n == 1 && arr[0].id == u1 &&
          arr[0].parent_id == 0);
    db_messages_free(arr, n);
    CHECK(db_message_children(d, sid, a3, &arr, &n, &e) == 0 && n == 0 && arr == NULL);

    CHECK(db_message_path(d, a3, &arr, &n, &e) == 0 && n == 4);
    if (n == 4) CHECK(arr[0].id == u1 && arr[1].id == a1 && arr[2].id == u2 && arr[3].id == a3);
    db_messages_free(arr, n);
    CHECK(db_message_path(d, a2, &arr, &n, &e) == 0 && n == 2 && arr[1].id == a2);
    db_messages_free(arr, n);
    CHECK(db_message_path(d, 0, &arr, &n, &e) == 0 && n == 0);
    CHECK(db_message_path(d, 99999, &arr, &n, &e) == LLC_ERR_NOTFOUND);

    int64_t leaf = 0;
    CHECK(db_message_latest_leaf(d, u1, &leaf, &e) == 0 && leaf == a2);
    CHECK(db_message_latest_leaf(d, a1, &leaf, &e) == 0 && leaf == a3);
    CHECK(db_message_latest_leaf(d, a3, &leaf, &e) == 0 && leaf == a3);
    CHECK(db_message_latest_leaf(d, 99999, &leaf, &e) == LLC_ERR_NOTFOUND);

    /* bad arguments */
    int64_t id = 0;
    CHECK(db_message_add(d, sid, 99999, DB_ROLE_USER, "x", DB_NTS, 0, &id, &e) ==
          LLC_ERR_NOTFOUND);
    CHECK(db_message_add(d, other, u1, DB_ROLE_USER, "x", DB_NTS, 0, &id, &e) ==
          LLC_ERR_NOTFOUND); /* parent in another session */
    CHECK(db_message_add(d, 99999, 0, DB_ROLE_USER, "x", DB_NTS, 0, &id, &e) == LLC_ERR_NOTFOUND);
    CHECK(db_message_add(d, sid, 0, 7, "x", DB_NTS, 0, &id, &e) == LLC_ERR_RANGE);
    CHECK(db_message_add(d, sid, 0, DB_ROLE_USER, "x", DB_NTS, 9, &id, &e) == LLC_ERR_RANGE);
    CHECK(db_session_set_active_leaf(d, other, a2, &e) == LLC_ERR_NOTFOUND);
    CHECK(db_message_set_content(d, 99999, "x", 1, 0, &e) == LLC_ERR_NOTFOUND);

    /* embedded NULs and NULL content */
    int64_t bin = 0, empty = 0;
    CHECK(db_message_add(d, sid, a2, DB_ROLE_USER, "ab\0cd", 5, DB_STATE_DONE, &bin, &e) == 0);
    CHECK(db_message_add(d, sid, bin, DB_ROLE_ASSISTANT, NULL, 0, DB_STATE_DONE, &empty, &e) == 0);
    db_message m;
    CHECK(db_message_get(d, bin, &m, &e) == 0 && m.content_len == 5 &&
          !memcmp(m.content, "ab\0cd", 6));
    db_message_clear(&m);
    CHECK(db_message_get(d, empty, &m, &e) == 0 && m.content_len == 0 && !strcmp(m.content, ""));
    db_message_clear(&m);

    /* the active leaf is remembered across reopen */
    CHECK(db_session_set_active_leaf(d, sid, a2, &e) == 0);
    db_close(d);
    d = open_ok(p);
    if (!d) return;
    CHECK(db_session_get(d, sid, &s, &e) == 0 && s.active_leaf == a2);
    db_session_clear(&s);

    /* deleting a subtree that holds the active leaf moves it up */
    CHECK(db_session_set_active_leaf(d, sid, a3, &e) == 0);
    CHECK(db_message_delete(d, a1, &e) == 0);
    CHECK(db_message_get(d, u2, &m, &e) == LLC_ERR_NOTFOUND);
    CHECK(db_message_get(d, a3, &m, &e) == LLC_ERR_NOTFOUND);
    CHECK(db_session_get(d, sid, &s, &e) == 0 && s.active_leaf == empty);
    db_session_clear(&s);
    CHECK(db_message_delete(d, u1, &e) == 0); /* the whole tree */
    CHECK(db_session_get(d, sid, &s, &e) == 0 && s.active_leaf == 0);
    db_session_clear(&s);
    CHECK(db_message_children(d, sid, 0, &arr, &n, &e) == 0 && n == 0);
    CHECK(db_message_delete(d, u1, &e) == LLC_ERR_NOTFOUND);

    /* a long conversation: deleting its root and its session does not recurse */
    int64_t prev = 0;
    for (int i = 0; i < 1500; i++)
        prev = add_msg(d, sid, prev, i % 2 ? DB_ROLE_ASSISTANT : DB_ROLE_USER, "turn");
    CHECK(db_message_path(d, prev, &arr, &n, &e) == 0 && n == 1500);
    db_messages_free(arr, n);
    CHECK(db_session_delete(d, sid, &e) == 0);
    db_close(d);
}

static void test_message_finish(void) {
    db *d = open_ok(tpath("finish.db"));
    if (!d) return;
    llc_err e = {{0}};
    int64_t sid = new_session(d, "f");
    int64_t u = add_msg(d, sid, 0, DB_ROLE_USER, "hi");
    int64_t a = 0;
    CHECK(db_message_add(d, sid, u, DB_ROLE_ASSISTANT, "", 0, DB_STATE_STREAMING, &a, &e) == 0);
    CHECK(db_message_set_content(d, a, "Hel", 3, DB_STATE_STREAMING, &e) == 0);
    CHECK(search_count(d, "quokka") == 0);
    CHECK(db_message_set_content(d, a, "Hello quokka", DB_NTS, DB_STATE_STREAMING, &e) == 0);
    CHECK(search_count(d, "quokka") == 0); /* not indexed while streaming */
    db_usage us = {.prompt_tokens = 12, .cached_tokens = 4, .completion_tokens = 3,
                   .ttft_ms = 25.5, .tpot_ms = 8.25};
    CHECK(db_message_finish(d, a, NULL, 0, DB_STATE_DONE, &us, "stop", &e) == 0);
    db_message m;
    CHECK(db_message_get(d, a, &m, &e) == 0);
    CHECK(!strcmp(m.content, "Hello quokka") && m.state == DB_STATE_DONE &&
          m.usage.prompt_tokens == 12 && m.usage.cached_tokens == 4 &&
          m.usage.completion_tokens == 3 && m.usage.ttft_ms == 25.5 && m.usage.tpot_ms == 8.25 &&
          !strcmp(m.finish, "stop"));
    db_message_clear(&m);
    CHECK(search_count(d, "quokka") == 1);
    CHECK(db_message_finish(d, a, "Cancelled wombat", DB_NTS, DB_STATE_CANCELLED, NULL, NULL, &e) ==
          0);
    CHECK(db_message_get(d, a, &m, &e) == 0 && m.state == DB_STATE_CANCELLED &&
          !strcmp(m.content, "Cancelled wombat") && m.usage.prompt_tokens == 0 &&
          !strcmp(m.finish, ""));
    db_message_clear(&m);
    CHECK(search_count(d, "quokka") == 0 && search_count(d, "wombat") == 1);
    CHECK(db_message_finish(d, 99999, NULL, 0, DB_STATE_DONE, NULL, NULL, &e) == LLC_ERR_NOTFOUND);
    CHECK(!strcmp(db_state_name(DB_STATE_INTERRUPTED), "interrupted") &&
          !strcmp(db_role_name(DB_ROLE_ASSISTANT), "assistant") && !strcmp(db_role_name(9), "?"));
    db_close(d);
}

static void test_streaming_crash_recovery(void) {
    const char *p = tpath("crash.db");
    db *d = open_ok(p);
    if (!d) return;
    int64_t sid = new_session(d, "crash");
    db_close(d);
    fflush(NULL);

    pid_t pid = fork();
    if (pid == 0) {
        db *c = NULL;
        if (db_open(p, &c, NULL)) _exit(2);
        int64_t u, a;
        if (db_message_add(c, sid, 0, DB_ROLE_USER, "tell a story", DB_NTS, DB_STATE_DONE, &u,
                           NULL) ||
            db_message_add(c, sid, u, DB_ROLE_ASSISTANT, "", 0, DB_STATE_STREAMING, &a, NULL))
            _exit(3);
        const char *steps[] = {"Once", "Once upon", "Once upon a time a zebra"};
        for (int i = 0; i < 3; i++)
            if (db_message_set_content(c, a, steps[i], DB_NTS, DB_STATE_STREAMING, NULL)) _exit(4);
        raise(SIGKILL);
        _exit(5);
    }
    CHECK(pid > 0);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d", status);

    d = open_ok(p);
    if (!d) return;
    llc_err e = {{0}};
    CHECK(db_interrupted_at_open(d) == 1);
    db_session s;
    CHECK(db_session_get(d, sid, &s, &e) == 0);
    db_message m;
    CHECK(db_message_get(d, s.active_leaf, &m, &e) == 0);
    CHECKF(!strcmp(m.content, "Once upon a time a zebra") && m.state == DB_STATE_INTERRUPTED &&
               m.role == DB_ROLE_ASSISTANT,
           "content '%s' state %d", m.content ? m.content : "", m.state);
    db_message_clear(&m);
    db_session_clear(&s);
    CHECK(search_count(d, "zebra") == 1);

    /* a second connection does not interrupt an answer the first is streaming */
    int64_t u = add_msg(d, sid, 0, DB_ROLE_USER, "again"), a = 0;
    CHECK(db_message_add(d, sid, u, DB_ROLE_ASSISTANT, "stream", DB_NTS, DB_STATE_STREAMING, &a,
                         &e) == 0);
    db *d2 = open_ok(p);
    CHECK(d2 && db_interrupted_at_open(d2) == 0);
    CHECK(d2 && db_message_get(d2, a, &m, &e) == 0 && m.state == DB_STATE_STREAMING);
    db_message_clear(&m);
    db_close(d2);
    db_close(d);
    d = open_ok(p); /* nobody else has it open now */
    CHECK(d && db_interrupted_at_open(d) == 1);
    CHECK(d && db_message_get(d, a, &m, &e) == 0 && m.state == DB_STATE_INTERRUPTED);
    db_message_clear(&m);
    db_close(d);
}

static void test_search(void) {
    db *d = open_ok(tpath("search.db"));
    if (!d) return;
    llc_err e = {{0}};
    int64_t s1 = new_session(d, "Greetings");
    int64_t s2 = new_session(d, "Code talk");
    int64_t m1 = add_msg(d, s1, 0, DB_ROLE_USER, "hello world, how are you today?");
    int64_t m2 = add_msg(d, s1, m1, DB_ROLE_ASSISTANT, "Hello! I'm fine. It's a \"hello\" day.");
    int64_t m3 = add_msg(d, s2, 0, DB_ROLE_USER, "is c++ better than rust for parsing?");

    db_hit *h = NULL;
    int n = 0;
    CHECK(db_search(d, "world", 10, &h, &n, &e) == 0 && n == 1);
    if (n == 1) {
        CHECK(h[0].session_id == s1 && h[0].message_id == m1 && h[0].role == DB_ROLE_USER);
        CHECK(!strcmp(h[0].title, "Greetings"));
        CHECKF(strstr(h[0].snippet, "[world]"), "%s", h[0].snippet);
    }
    db_hits_free(h, n);
    CHECK(search_count(d, "hello") == 2);
    CHECK(db_search(d, "hello", 1, &h, &n, &e) == 0 && n == 1); /* limit */
    db_hits_free(h, n);
    CHECK(search_count(d, "HELLO World") == 1);
    CHECK(search_count(d, "hel*") == 2); /* prefix */
    CHECK(search_count(d, "pars*") == 1);
    CHECK(search_count(d, "it's \"hello\" c++") == 0);
    CHECK(search_count(d, "it's \"hello\"") == 1);
    CHECK(search_count(d, "c++ rust") == 1);
    CHECK(db_search(d, "c++", 10, &h, &n, &e) == 0 && n == 1 && h[0].message_id == m3);
    db_hits_free(h, n);

    const char *hostile[] = {"\"", "\"\"\"", "*", "-", "-hello", "NEAR(", "NEAR(hello world)",
                             "AND", "OR", "NOT", "hello AND", "(", ")", "a:b", "content:hello",
                             "^hello", "hello +", "{content}: x", "'", "\\", "%", "\x01\x02",
                             "\xff\xfe broken utf8", "   ", ""};
    for (size_t i = 0; i < LLC_ARRAY_LEN(hostile); i++) {
        int c = search_count(d, hostile[i]);
        CHECKF(c >= 0, "hostile query #%zu", i);
    }
    CHECK(search_count(d, "(hello world)") == 1); /* punctuation is not syntax */
    CHECK(search_count(d, "NEAR(hello world)") == 0); /* the phrase "near hello" */
    CHECK(search_count(d, "-hello") == 2);
    CHECK(search_count(d, "content:hello") == 0);
    CHECK(db_search(d, NULL, 0, &h, &n, &e) == 0 && n == 0);

    /* updates and deletions are reflected */
    CHECK(db_message_set_content(d, m3, "is zig better than rust?", DB_NTS, DB_STATE_DONE,
                                 &e) == 0);
    CHECK(search_count(d, "parsing") == 0 && search_count(d, "zig") == 1);
    CHECK(db_session_set_title(d, s2, "Languages", &e) == 0);
    CHECK(db_search(d, "zig", 10, &h, &n, &e) == 0 && n == 1 && !strcmp(h[0].title, "Languages"));
    db_hits_free(h, n);
    CHECK(db_message_delete(d, m2, &e) == 0);
    CHECK(search_count(d, "fine") == 0 && search_count(d, "hello") == 1);
    CHECK(db_session_delete(d, s2, &e) == 0);
    CHECK(search_count(d, "rust") == 0);
    /* the FTS index still matches its content table */
    CHECK(sqlite3_exec(d->h,
                       "INSERT INTO messages_fts(messages_fts, rank) VALUES('integrity-check', 1)",
                       NULL, NULL, NULL) == SQLITE_OK);
    db_close(d);
}

static void test_tabs_and_settings(void) {
    const char *p = tpath("ui.db");
    db *d = open_ok(p);
    if (!d) return;
    llc_err e = {{0}};
    int64_t s1 = new_session(d, "1"), s2 = new_session(d, "2"), s3 = new_session(d, "3");
    int64_t *ids = NULL;
    int n = -1, active = 5;
    CHECK(db_tabs_load(d, &ids, &n, &active, &e) == 0 && n == 0 && ids == NULL && active == -1);
    int64_t tabs[] = {s3, s1, 777, s2};
    CHECK(db_tabs_save(d, tabs, 4, 3, &e) == 0);
    CHECK(db_setting_set(d, "theme", "dark", &e) == 0);
    CHECK(db_setting_set(d, "theme", "light", &e) == 0);
    CHECK(db_setting_set(d, "gone", "x", &e) == 0);
    CHECK(db_setting_set(d, "gone", NULL, &e) == 0);
    db_close(d);

    d = open_ok(p);
    if (!d) return;
    CHECK(db_tabs_load(d, &ids, &n, &active, &e) == 0 && n == 3);
    if (n == 3) CHECK(ids[0] == s3 && ids[1] == s1 && ids[2] == s2 && active == 2);
    free(ids);
    CHECK(db_session_delete(d, s1, &e) == 0);
    CHECK(db_tabs_load(d, &ids, &n, &active, &e) == 0 && n == 2);
    if (n == 2) CHECK(ids[0] == s3 && ids[1] == s2 && active == 1);
    free(ids);
    CHECK(db_tabs_save(d, tabs, 1, -1, &e) == 0);
    CHECK(db_tabs_load(d, &ids, &n, &active, &e) == 0 && n == 1 && ids[0] == s3 && active == -1);
    free(ids);
    CHECK(db_tabs_save(d, NULL, 0, -1, &e) == 0);
    CHECK(db_tabs_load(d, &ids, &n, &active, &e) == 0 && n == 0);

    char *v = NULL;
    CHECK(db_setting_get(d, "theme", &v, &e) == 0 && v && !strcmp(v, "light"));
    free(v);
    CHECK(db_setting_get(d, "gone", &v, &e) == 0 && v == NULL);
    CHECK(db_setting_get(d, "never", &v, &e) == 0 && v == NULL);
    CHECK(db_setting_set(d, "empty", "", &e) == 0);
    CHECK(db_setting_get(d, "empty", &v, &e) == 0 && v && !strcmp(v, ""));
    free(v);
    db_close(d);
}

/* An answer's reasoning (a thinking model's) is stored beside its content:
 * read back with it, not searched as content, quoted before the answer in an
 * export; setting it on a missing message is NOTFOUND. */
static void test_reasoning_beside_content(void) {
    db *d = open_ok(tpath("reasoning.db"));
    if (!d) return;
    llc_err e = {{0}};
    int64_t sid = new_session(d, "think");
    int64_t u = add_msg(d, sid, 0, DB_ROLE_USER, "Hi");
    int64_t r = add_msg(d, sid, u, DB_ROLE_ASSISTANT, "Hello there.");
    CHECK(db_message_set_reasoning(d, r, "I plan\na greeting.", DB_NTS, &e) == 0);
    CHECK(db_message_set_reasoning(d, r + 100, "x", DB_NTS, &e) == LLC_ERR_NOTFOUND);
    db_message m;
    CHECK(db_message_get(d, r, &m, &e) == 0);
    CHECK(!strcmp(m.content, "Hello there.") && !strcmp(m.reasoning, "I plan\na greeting.") && m.reasoning_len == 18);
    db_message_clear(&m);
    CHECK(search_count(d, "greeting") == 1 && search_count(d, "Hello") == 1);
    /* a word only the reasoning has: found, the hit says so and shows the reasoning */
    db_hit *h = NULL;
    int n = 0;
    CHECK(db_search(d, "greeting", 10, &h, &n, &e) == 0 && n == 1);
    if (n == 1) CHECKF(h[0].message_id == r && h[0].in_reasoning && strstr(h[0].snippet, "[greeting]"), "%s", h[0].snippet);
    db_hits_free(h, n);
    CHECK(db_search(d, "hello", 10, &h, &n, &e) == 0 && n == 1);
    if (n == 1) CHECKF(!h[0].in_reasoning && !strcmp(h[0].snippet, "[Hello] there."), "%s", h[0].snippet);
    db_hits_free(h, n);
    CHECK(search_count(d, "plan hello") == 1); /* words in both: one hit, on the text */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(db_export_markdown(d, sid, 0, f, &e) == 0);
    fclose(f);
    const char *q = buf ? strstr(buf, "> *Reasoning*\n>\n> I plan\n> a greeting.") : NULL;
    const char *ans = buf ? strstr(buf, "Hello there.") : NULL;
    CHECKF(q && ans && q < ans, "%s", buf ? buf : "");
    free(buf);
    CHECK(db_message_set_reasoning(d, r, "Something else.", DB_NTS, &e) == 0); /* re-indexed */
    CHECK(search_count(d, "greeting") == 0 && search_count(d, "else") == 1);
    /* its size and time, stored with its usage */
    db_usage u2 = {.completion_tokens = 40, .reasoning_tokens = 312, .reasoning_ms = 4200};
    CHECK(db_message_finish(d, r, NULL, 0, DB_STATE_DONE, &u2, "stop", &e) == 0);
    CHECK(db_message_get(d, r, &m, &e) == 0);
    CHECK(m.usage.reasoning_tokens == 312 && m.usage.reasoning_ms == 4200 && m.usage.completion_tokens == 40);
    db_message_clear(&m);
    CHECK(sqlite3_exec(d->h, "INSERT INTO messages_fts(messages_fts, rank) VALUES('integrity-check', 1)", NULL, NULL,
                       NULL) == SQLITE_OK);
    db_close(d);
}

static void test_export_markdown(void) {
    db *d = open_ok(tpath("export.db"));
    if (!d) return;
    llc_err e = {{0}};
    int64_t sid = 0;
    CHECK(db_session_create(d, "Trip plan", "You are a travel agent.", "tiny", NULL, &sid,
                            &e) == 0);
    int64_t u1 = add_msg(d, sid, 0, DB_ROLE_USER, "Where to go in May?");
    int64_t a1 = add_msg(d, sid, u1, DB_ROLE_ASSISTANT, "Lisbon is lovely in May.");
    add_msg(d, sid, u1, DB_ROLE_ASSISTANT, "ALTERNATIVE ANSWER");
    int64_t u2 = add_msg(d, sid, a1, DB_ROLE_USER, "And in June?");
    int64_t a2 = 0;
    CHECK(db_message_add(d, sid, u2, DB_ROLE_ASSISTANT, "Norway, for the", DB_NTS,
                         DB_STATE_STREAMING, &a2, &e) == 0);
    CHECK(db_message_finish(d, a2, NULL, 0, DB_STATE_CANCELLED, NULL, NULL, &e) == 0);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(db_export_markdown(d, sid, 0, f, &e) == 0); /* the active path */
    fclose(f);
    const char *t = strstr(buf, "# Trip plan");
    const char *sys = strstr(buf, "You are a travel agent.");
    const char *q1 = strstr(buf, "**User**\n\nWhere to go in May?");
    const char *r1 = strstr(buf, "**Assistant**\n\nLisbon is lovely in May.");
    const char *q2 = strstr(buf, "**User**\n\nAnd in June?");
    const char *r2 = strstr(buf, "**Assistant** *(cancelled)*\n\nNorway, for the");
    CHECKF(t && sys && q1 && r1 && q2 && r2 && t < sys && sys < q1 && q1 < r1 && r1 < q2 &&
               q2 < r2,
           "%s", buf);
    CHECK(!strstr(buf, "ALTERNATIVE"));
    free(buf);

    f = open_memstream(&buf, &len);
    CHECK(db_export_markdown(d, sid, a1, f, &e) == 0); /* an explicit leaf */
    fclose(f);
    CHECK(strstr(buf, "Lisbon") && !strstr(buf, "June"));
    free(buf);
    int64_t other = new_session(d, "x");
    f = open_memstream(&buf, &len);
    CHECK(db_export_markdown(d, other, a1, f, &e) == LLC_ERR_NOTFOUND);
    CHECK(db_export_markdown(d, 9999, 0, f, &e) == LLC_ERR_NOTFOUND);
    fclose(f);
    free(buf);
    db_close(d);
}

/* Checks a read-only connection: reads work, writes say read-only. 0 = ok. */
static int readonly_checks(const char *p, unsigned flags, int64_t sid) {
    db *d = NULL;
    llc_err e = {{0}};
    int bad = 0;
    if (db_open_ex(p, flags, &d, &e) != 0) {
        fprintf(stderr, "  read-only open: %s\n", e.msg);
        return 1;
    }
    bad += !db_is_readonly(d);
    db_session s;
    bad += db_session_get(d, sid, &s, &e) != 0;
    bad += !s.title || strcmp(s.title, "keep") != 0;
    db_session_clear(&s);
    bad += search_count(d, "precious") != 1;
    int64_t id;
    int rc = db_session_create(d, "x", NULL, NULL, NULL, &id, &e);
    bad += rc != DB_ERR_READONLY || !strstr(e.msg, "read-only") || !strstr(e.msg, p);
    bad += db_last_errcode(d) != DB_ERR_READONLY;
    bad += db_message_add(d, sid, 0, DB_ROLE_USER, "x", DB_NTS, 0, &id, &e) != DB_ERR_READONLY;
    bad += db_setting_set(d, "k", "v", &e) != DB_ERR_READONLY;
    db_close(d);
    if (bad) fprintf(stderr, "  read-only checks: %d failed (%s)\n", bad, e.msg);
    return bad;
}

static void test_readonly(void) {
    const char *p = tpath("ro/ro.db");
    CHECK(mkdir(tpath("ro"), 0777) == 0);
    chmod(tpath("ro"), 0777);
    db *d = open_ok(p);
    if (!d) return;
    int64_t sid = new_session(d, "keep");
    add_msg(d, sid, 0, DB_ROLE_USER, "precious words");
    db_close(d);

    CHECK(readonly_checks(p, DB_OPEN_READONLY, sid) == 0);

    /* a file the user may not write, then also a directory the user may not write */
    CHECK(chmod(p, 0444) == 0);
    for (int dir_ro = 0; dir_ro < 2; dir_ro++) {
        char side[300];
        snprintf(side, sizeof side, "%s-wal", p);
        unlink(side);
        snprintf(side, sizeof side, "%s-shm", p);
        unlink(side);
        chmod(tpath("ro"), dir_ro ? 0555 : 0777);
        if (geteuid() != 0) {
            CHECKF(readonly_checks(p, 0, sid) == 0, "read-only %s", dir_ro ? "directory" : "file");
            continue;
        }
        /* root writes anyway: try as nobody in a child */
        chmod(g_dir, 0755);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0) _exit(77);
            _exit(readonly_checks(p, 0, sid) ? 1 : 0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        chmod(g_dir, 0700);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
            printf("     note: running as root and cannot drop privileges; read-only files "
                   "are covered by DB_OPEN_READONLY only\n");
        else
            CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "read-only %s: child status %d",
                   dir_ro ? "directory" : "file", status);
    }
    chmod(tpath("ro"), 0777);
    chmod(p, 0644);

    /* read-only and in need of an upgrade */
    const char *old = tpath("ro/old.db");
    CHECK(db_open_at_version(old, 1, &d, NULL) == 0);
    db_close(d);
    llc_err e = {{0}};
    size_t n;
    char *before = t_read_file(old, &n);
    CHECK(db_open_ex(old, DB_OPEN_READONLY, &d, &e) == DB_ERR_READONLY && d == NULL);
    CHECKF(strstr(e.msg, "needs an upgrade"), "%s", e.msg);
    CHECK(before && same_bytes(old, before, n));
    free(before);
}

static void test_big_message(void) {
    db *d = open_ok(tpath("big.db"));
    if (!d) return;
    llc_err e = {{0}};
    size_t len = 10u << 20;
    char *big = malloc(len);
    const char *words[] = {"alpha ", "beta ", "gamma ", "delta\n", "epsilon "};
    size_t o = 0;
    for (int i = 0; o < len; i++) {
        const char *w = words[i % 5];
        size_t wl = strlen(w);
        if (wl > len - o) wl = len - o;
        memcpy(big + o, w, wl);
        o += wl;
    }
    big[1000] = 0; /* embedded NULs survive */
    big[len / 2] = 0;
    memcpy(big + len - 9, " zyzzyva ", 9);
    int64_t sid = new_session(d, "big"), id = 0;
    CHECKF(db_message_add(d, sid, 0, DB_ROLE_USER, big, len, DB_STATE_DONE, &id, &e) == 0, "%s",
           e.msg);
    db_message m;
    CHECK(db_message_get(d, id, &m, &e) == 0 && m.content_len == len &&
          !memcmp(m.content, big, len) && m.content[len] == 0);
    db_message_clear(&m);
    CHECK(search_count(d, "zyzzyva") == 1);
    big[7] = 'X';
    CHECK(db_message_set_content(d, id, big, len, DB_STATE_DONE, &e) == 0);
    CHECK(db_message_get(d, id, &m, &e) == 0 && m.content_len == len &&
          !memcmp(m.content, big, len));
    db_message_clear(&m);
    free(big);
    db_close(d);
}

static void test_locked(void) {
    const char *p = tpath("locked.db");
    db *d = open_ok(p);
    if (!d) return;
    llc_err e = {{0}};
    int64_t sid = new_session(d, "locked");
    sqlite3 *other;
    CHECK(sqlite3_open(p, &other) == SQLITE_OK);
    CHECK(sqlite3_exec(other, "BEGIN EXCLUSIVE; INSERT INTO settings VALUES('x', 'y')", NULL, NULL,
                       NULL) == SQLITE_OK);
    db_set_busy_timeout(d, 100);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t id;
    int rc = db_session_create(d, "blocked", NULL, NULL, NULL, &id, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    CHECKF(rc == DB_ERR_LOCKED, "%d %s", rc, e.msg);
    CHECKF(strstr(e.msg, p) && strstr(e.msg, "database is locked by another program"), "%s", e.msg);
    CHECKF(ms >= 80, "gave up after %.0f ms", ms);
    CHECK(db_last_errcode(d) == DB_ERR_LOCKED);
    CHECK(db_message_add(d, sid, 0, DB_ROLE_USER, "x", DB_NTS, 0, &id, &e) == DB_ERR_LOCKED);
    db_session *list = NULL;
    int n = 0;
    CHECK(db_session_list(d, false, &list, &n, &e) == 0 && n == 1); /* reading goes on */
    db_sessions_free(list, n);

    /* opening an up-to-date file needs no write lock */
    db *d2 = open_ok(p);
    db_close(d2);

    CHECK(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
    CHECK(db_session_create(d, "free again", NULL, NULL, NULL, &id, &e) == 0);
    db_close(d);

    /* an upgrade while another program holds the lock */
    const char *old = tpath("locked_old.db");
    CHECK(db_open_at_version(old, 1, &d, NULL) == 0);
    db_close(d);
    sqlite3 *o2;
    CHECK(sqlite3_open(old, &o2) == SQLITE_OK);
    CHECK(sqlite3_exec(o2, "BEGIN EXCLUSIVE; INSERT INTO sessions(created, updated) VALUES(1, 1)",
                       NULL, NULL, NULL) == SQLITE_OK);
    d = (db *)1;
    rc = db_open(old, &d, &e);
    CHECKF(rc == DB_ERR_LOCKED && !d && strstr(e.msg, "locked"), "%d %s", rc, e.msg);
    sqlite3_exec(o2, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(o2);
    sqlite3_close(other);
}

static void test_disk_full_and_error_mapping(void) {
    db *d = open_ok(tpath("full.db"));
    if (!d) return;
    llc_err e = {{0}};
    int64_t sid = new_session(d, "full");
    /* the file may not grow: as good as a full disk */
    CHECK(sqlite3_exec(d->h, "PRAGMA max_page_count = 20", NULL, NULL, NULL) == SQLITE_OK);
    char *big = malloc(200000);
    memset(big, 'z', 199999);
    big[199999] = 0;
    int64_t id = 0;
    int rc = db_message_add(d, sid, 0, DB_ROLE_USER, big, DB_NTS, DB_STATE_DONE, &id, &e);
    CHECKF(rc == DB_ERR_FULL && strstr(e.msg, "disk is full"), "%d %s", rc, e.msg);
    free(big);
    /* nothing half-written; the connection still works */
    db_message *arr = NULL;
    int n = 0;
    CHECK(db_message_children(d, sid, 0, &arr, &n, &e) == 0 && n == 0);
    CHECK(add_msg(d, sid, 0, DB_ROLE_USER, "small") > 0);
    db_close(d);

    struct {
        int rc, code;
        const char *text;
    } map[] = {
        {SQLITE_BUSY, DB_ERR_LOCKED, "locked by another program"},
        {SQLITE_LOCKED, DB_ERR_LOCKED, "locked"},
        {SQLITE_READONLY, DB_ERR_READONLY, "read-only"},
        {SQLITE_FULL, DB_ERR_FULL, "disk is full"},
        {SQLITE_CORRUPT, DB_ERR_CORRUPT, "corrupt"},
        {SQLITE_NOTADB, DB_ERR_CORRUPT, "corrupt"},
        {SQLITE_NOMEM, LLC_ERR_NOMEM, "out of memory"},
        {SQLITE_IOERR_WRITE, LLC_ERR_IO, "I/O error"},
        {SQLITE_CANTOPEN, LLC_ERR_IO, "cannot open"},
        {SQLITE_TOOBIG, LLC_ERR_RANGE, "too large"},
    };
    for (size_t i = 0; i < LLC_ARRAY_LEN(map); i++) {
        int code = dbi_sqlfail(NULL, map[i].rc, "testing", &e);
        CHECKF(code == map[i].code && strstr(e.msg, map[i].text), "rc %d: %d %s", map[i].rc, code,
               e.msg);
        CHECK(!strchr(e.msg, '\n'));
    }
}

/* ---- main ----------------------------------------------------------------- */

static void rm_rf(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path, 0700);
        DIR *dir = opendir(path);
        struct dirent *de;
        while (dir && (de = readdir(dir))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            char sub[512];
            snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
            rm_rf(sub);
        }
        if (dir) closedir(dir);
        rmdir(path);
    } else {
        unlink(path);
    }
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/llmchat-storage-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_default_path);
    RUN(test_new_files_private);
    RUN(test_schema_latest);
    RUN(test_migrations_from_every_version);
    RUN(test_too_new_refused);
    RUN(test_bad_files_refused_untouched);
    RUN(test_sessions);
    RUN(test_message_tree);
    RUN(test_message_finish);
    RUN(test_streaming_crash_recovery);
    RUN(test_search);
    RUN(test_tabs_and_settings);
    RUN(test_export_markdown);
    RUN(test_reasoning_beside_content);
    RUN(test_readonly);
    RUN(test_big_message);
    RUN(test_locked);
    RUN(test_disk_full_and_error_mapping);
    rm_rf(g_dir);
    return t_summary();
}
