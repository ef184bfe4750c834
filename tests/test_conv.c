/* test_conv.c — a conversation kept in memory and in the database: the user's
 * message stored before anything else, streamed text saved at most once a
 * second and in full at the end, alternatives stored as siblings with the one
 * shown remembered, and a locked database: saving fails with the reason,
 * nothing in memory is lost, and the retry stores everything. */
#include <sqlite3.h>
#include <unistd.h>

#include "tests/test.h"
#include "storage/conv.h"

static char g_dir[64], g_path[128];

static void test_save_and_load_with_alternatives(void) {
    db *d;
    llc_err err;
    CHECK(db_open(g_path, &d, &err) == 0);
    conv *c;
    CHECK(conv_create("Cats", &c) == 0);
    c->set.temperature = 0.25f;
    c->set.n = 2;
    free(c->system);
    c->system = strdup("Be brief.");
    CHECK(conv_add_user(c, "Tell me about cats", 18) == 0);
    CHECK(conv_save(c, d, "m.gguf", true, 0) == 0 && c->session_id > 0 && c->msgs[0]->id > 0);
    int first = conv_open_answers(c, 2);
    CHECK(first == 0 && c->n_alts == 2);
    conv_append(c, 0, "Cats purr", 9);
    conv_append(c, 1, "Cats sleep", 10);
    CHECK(conv_save(c, d, "m.gguf", false, 100) == 0); /* stores the new answers */
    conv_append(c, 0, " a lot.", 7);
    CHECK(conv_save(c, d, "m.gguf", false, 200) == 0); /* < 1 s later: throttled */
    db_message m;
    CHECK(db_message_get(d, c->alts[0]->id, &m, &err) == 0);
    CHECK(m.state == DB_STATE_STREAMING && !strcmp(m.content, "Cats purr")); /* not yet " a lot." */
    db_message_clear(&m);
    db_usage u = {10, 4, 3, 5.0, 1.0, 0, 0};
    conv_finish(c, 0, DB_STATE_DONE, "stop", &u);
    conv_finish(c, 1, DB_STATE_DONE, "length", &u);
    c->alt_cur = 1;
    CHECK(conv_save(c, d, "m.gguf", true, 300) == 0 && !conv_unsaved(c));
    int64_t sid = c->session_id;
    conv_free(c);
    db_close(d);

    CHECK(db_open(g_path, &d, &err) == 0);
    CHECK(conv_load(d, sid, &c, &err) == 0);
    CHECK(!strcmp(c->title, "Cats") && !strcmp(c->system, "Be brief."));
    CHECK(c->set.n == 2 && fabsf(c->set.temperature - 0.25f) < 1e-6f);
    CHECK(c->n_msgs == 1 && !strcmp(c->msgs[0]->text, "Tell me about cats"));
    CHECK(c->n_alts == 2 && c->alt_cur == 1); /* the answer shown is remembered */
    CHECK(!strcmp(c->alts[0]->text, "Cats purr a lot.") && !strcmp(c->alts[1]->text, "Cats sleep"));
    CHECK(c->alts[0]->usage.completion_tokens == 3 && !strcmp(c->alts[1]->finish, "length"));
    /* the prompt is system + path up to the user's message */
    chat_msg *msgs;
    int n;
    CHECK(conv_chat_msgs(c, &msgs, &n) == 0 && n == 2 && msgs[0].role == CHAT_SYSTEM &&
          msgs[1].role == CHAT_USER);
    free(msgs);
    /* the next turn continues from the answer shown */
    CHECK(conv_add_user(c, "And dogs?", 9) == 0);
    CHECK(c->n_alts == 0 && c->n_msgs == 3 && !strcmp(c->msgs[1]->text, "Cats sleep"));
    CHECK(conv_save(c, d, "m.gguf", true, 0) == 0);
    db_message *path;
    int np;
    db_session s;
    CHECK(db_session_get(d, sid, &s, &err) == 0);
    CHECK(db_message_path(d, s.active_leaf, &path, &np, &err) == 0 && np == 3);
    CHECK(np == 3 && !strcmp(path[1].content, "Cats sleep") && !strcmp(path[2].content, "And dogs?"));
    db_messages_free(path, np);
    db_session_clear(&s);
    conv_free(c);
    db_close(d);
}

static void test_locked_database_keeps_everything(void) {
    db *d;
    llc_err err;
    CHECK(db_open(g_path, &d, &err) == 0);
    db_set_busy_timeout(d, 50);
    sqlite3 *other;
    CHECK(sqlite3_open(g_path, &other) == SQLITE_OK);
    CHECK(sqlite3_exec(other, "BEGIN EXCLUSIVE", NULL, NULL, NULL) == SQLITE_OK);
    conv *c;
    conv_create("Locked", &c);
    conv_add_user(c, "Are you there?", 14);
    CHECK(conv_save(c, d, "m.gguf", true, 0) < 0);
    CHECKF(strstr(c->save_error, "locked") != NULL, "%s", c->save_error);
    CHECK(conv_unsaved(c));
    conv_open_answers(c, 1);
    conv_append(c, 0, "Yes.", 4);
    conv_finish(c, 0, DB_STATE_DONE, "stop", NULL);
    CHECK(conv_save(c, d, "m.gguf", true, 1000) < 0 && conv_unsaved(c));
    sqlite3_exec(other, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(other);
    CHECK(conv_save(c, d, "m.gguf", true, 2000) == 0 && !conv_unsaved(c) && !c->save_error[0]);
    int64_t sid = c->session_id;
    conv_free(c);
    CHECK(conv_load(d, sid, &c, &err) == 0);
    CHECK(c->n_msgs == 1 && c->n_alts == 1 && !strcmp(c->alts[0]->text, "Yes."));
    conv_free(c);
    db_close(d);
}

static void test_no_database(void) {
    conv *c;
    conv_create(NULL, &c);
    conv_add_user(c, "hi", 2);
    CHECK(conv_save(c, NULL, "m", true, 0) < 0 && strstr(c->save_error, "memory"));
    CHECK(c->n_msgs == 1);
    conv_settings s;
    conv_settings_from_json("{\"temperature\": \"hot\", \"top_k\": -5, \"n\": 3}", &s);
    CHECK(s.n == 3 && s.top_k == conv_default_settings().top_k); /* bad fields keep defaults */
    conv_settings_from_json("not json", &s);
    CHECK(s.n == 1);
    conv_free(c);
}

/* Answers the conversation's last message with text, ending in state. */
static void answer_as(conv *c, const char *text, int state) {
    CHECK(conv_open_answers(c, 1) >= 0);
    if (text[0]) conv_append(c, c->n_alts - 1, text, strlen(text));
    conv_finish(c, c->n_alts - 1, state, state == DB_STATE_ERROR ? "error" : "stop", NULL);
}

/* A failed or empty answer is never sent back as the assistant's turn; the
 * user's messages around it become one turn, and a stopped answer with text
 * stays. */
static void test_failed_answers_are_left_out_of_the_prompt(void) {
    conv *c;
    CHECK(conv_create("t", &c) == 0);
    CHECK(conv_add_user(c, "one", 3) == 0);
    answer_as(c, "", DB_STATE_ERROR);                 /* nothing came */
    CHECK(conv_add_user(c, "two", 3) == 0);
    answer_as(c, "half an ans", DB_STATE_ERROR);      /* broke off mid-answer */
    CHECK(conv_add_user(c, "three", 5) == 0);
    answer_as(c, "", DB_STATE_CANCELLED);             /* stopped before any text */
    chat_msg *m;
    int n;
    CHECK(conv_chat_msgs_next(c, "four", &m, &n) == 0);
    CHECKF(n == 1 && m[0].role == CHAT_USER && !strcmp(m[0].content, "one\n\ntwo\n\nthree\n\nfour"), "n %d: %s", n,
           n ? m[0].content : "");
    free(m);
    CHECK(conv_add_user(c, "four", 4) == 0);
    CHECK(conv_chat_msgs(c, &m, &n) == 0 && n == 1 && !strcmp(m[0].content, "one\n\ntwo\n\nthree\n\nfour"));
    free(m);
    answer_as(c, "Stopped here", DB_STATE_CANCELLED); /* stopped with text: a real turn */
    CHECK(conv_add_user(c, "five", 4) == 0);
    CHECK(conv_chat_msgs(c, &m, &n) == 0 && n == 3);
    CHECK(n == 3 && m[1].role == CHAT_ASSISTANT && !strcmp(m[1].content, "Stopped here") &&
          m[2].role == CHAT_USER && !strcmp(m[2].content, "five"));
    free(m);
    c->editing = true; /* /edit: the next message replaces "five" */
    CHECK(conv_chat_msgs_next(c, "FIVE", &m, &n) == 0 && n == 3 && !strcmp(m[2].content, "FIVE"));
    free(m);
    conv_free(c);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/llc_conv_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    snprintf(g_path, sizeof g_path, "%s/chat.db", g_dir);
    RUN(test_save_and_load_with_alternatives);
    RUN(test_locked_database_keeps_everything);
    RUN(test_no_database);
    RUN(test_failed_answers_are_left_out_of_the_prompt);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd)) {}
    return t_summary();
}
