/* test_command.c — slash commands: each command and its argument, "//" escapes,
 * and one-line errors for unknown commands and bad values. */
#include "tests/test.h"
#include "ui/command.h"

static int parse(const char *s, ui_cmd *c, char *err) {
    return ui_cmd_parse(s, strlen(s), c, err, 128);
}

static void test_messages_and_escape(void) {
    ui_cmd c;
    char err[128];
    CHECK(parse("hello /there", &c, err) == 0 && c.kind == UI_CMD_MESSAGE && c.arg_len == 12);
    CHECK(parse("//etc/passwd", &c, err) == 0 && c.kind == UI_CMD_MESSAGE && c.arg_len == 11 &&
          !strncmp(c.arg, "/etc/passwd", 11));
    CHECK(parse("", &c, err) == 0 && c.kind == UI_CMD_MESSAGE && c.arg_len == 0);
}

static void test_commands_with_values(void) {
    ui_cmd c;
    char err[128];
    CHECK(parse("/set temp 0.25", &c, err) == 0 && c.kind == UI_CMD_SET && c.key == UI_SET_TEMP);
    CHECK_NEAR(c.value, 0.25, 1e-12);
    CHECK(parse("/set top_k 40", &c, err) == 0 && c.key == UI_SET_TOP_K && c.ivalue == 40);
    CHECK(parse("/set max_tokens 12 ", &c, err) == 0 && c.key == UI_SET_MAX_TOKENS && c.ivalue == 12);
    CHECK(parse("/set seed 7", &c, err) == 0 && c.key == UI_SET_SEED && c.ivalue == 7);
    CHECK(parse("/set min_p 0.05", &c, err) == 0 && c.key == UI_SET_MIN_P);
    CHECK(parse("/set top_p 1", &c, err) == 0 && c.key == UI_SET_TOP_P);
    CHECK(parse("/set", &c, err) == 0 && c.kind == UI_CMD_SET && c.key == UI_SET_SHOW);
    CHECK(parse("/set  ", &c, err) == 0 && c.key == UI_SET_SHOW);
    CHECK(parse("/n 3", &c, err) == 0 && c.kind == UI_CMD_N && c.ivalue == 3);
    CHECK(parse("/beam 4", &c, err) == 0 && c.kind == UI_CMD_BEAM && c.ivalue == 4);
    CHECK(parse("/alt", &c, err) == 0 && c.kind == UI_CMD_ALT && c.ivalue == 0);
    CHECK(parse("/alt 2", &c, err) == 0 && c.ivalue == 2);
    CHECK(parse("/system  Be brief.  ", &c, err) == 0 && c.kind == UI_CMD_SYSTEM &&
          c.arg_len == 9 && !strncmp(c.arg, "Be brief.", 9));
    CHECK(parse("/system", &c, err) == 0 && c.kind == UI_CMD_SYSTEM && c.arg_len == 0);
    CHECK(parse("/export", &c, err) == 0 && c.kind == UI_CMD_EXPORT && c.arg_len == 0);
    CHECK(parse("/export /tmp/x.md", &c, err) == 0 && c.arg_len == 9);
    CHECK(parse("/search red ball", &c, err) == 0 && c.kind == UI_CMD_SEARCH && c.arg_len == 8);
    CHECK(parse("/open 12", &c, err) == 0 && c.kind == UI_CMD_OPEN && c.ivalue == 12);
    CHECK(parse("/copy", &c, err) == 0 && c.kind == UI_CMD_COPY && c.arg_len == 0);
    CHECK(parse("/copy code", &c, err) == 0 && c.kind == UI_CMD_COPY && c.arg_len == 4 && c.ivalue == 0);
    CHECK(parse("/copy 3", &c, err) == 0 && c.kind == UI_CMD_COPY && c.ivalue == 3 && c.block == 0);
    CHECK(parse("/copy", &c, err) == 0 && c.ivalue == 0 && c.block == 0);
    CHECK(parse("/copy code", &c, err) == 0 && c.ivalue == 0 && c.block == -1);
    CHECK(parse("/copy code 2", &c, err) == 0 && c.ivalue == 0 && c.block == 2);
    CHECK(parse("/copy 4 code", &c, err) == 0 && c.ivalue == 4 && c.block == -1);
    CHECK(parse("/copy  4  code  12 ", &c, err) == 0 && c.ivalue == 4 && c.block == 12);
    CHECK(parse("/role", &c, err) == 0 && c.kind == UI_CMD_ROLE && c.arg_len == 0);
    CHECK(parse("/role coder", &c, err) == 0 && c.kind == UI_CMD_ROLE && c.arg_len == 5);
    CHECK(parse("/reasoning", &c, err) == 0 && c.kind == UI_CMD_REASONING);
    CHECK(parse("/think off", &c, err) == 0 && c.kind == UI_CMD_THINK && c.ivalue == 0);
    CHECK(parse("/think on", &c, err) == 0 && c.kind == UI_CMD_THINK && c.ivalue == 1);
    const char *plain[] = {"/regen", "/edit", "/branch", "/sessions", "/stats", "/model", "/new",
                           "/close", "/help", "/quit"};
    ui_cmd_kind kinds[] = {UI_CMD_REGEN, UI_CMD_EDIT, UI_CMD_BRANCH, UI_CMD_SESSIONS, UI_CMD_STATS,
                           UI_CMD_MODEL, UI_CMD_NEW, UI_CMD_CLOSE, UI_CMD_HELP, UI_CMD_QUIT};
    for (int i = 0; i < 10; i++) CHECK(parse(plain[i], &c, err) == 0 && c.kind == kinds[i] && c.ivalue == 0);
    /* the words some commands take */
    CHECK(parse("/system --clear", &c, err) == 0 && c.kind == UI_CMD_SYSTEM && c.ivalue == 1);
    CHECK(parse("/system Be brief", &c, err) == 0 && c.ivalue == 0);
    CHECK(parse("/branch next", &c, err) == 0 && c.kind == UI_CMD_BRANCH && c.ivalue == 1);
    CHECK(parse("/branch prev ", &c, err) == 0 && c.kind == UI_CMD_BRANCH && c.ivalue == -1);
    CHECK(parse("/sessions --all", &c, err) == 0 && c.kind == UI_CMD_SESSIONS && c.ivalue == 1);
    CHECK(parse("/archive 3", &c, err) == 0 && c.kind == UI_CMD_ARCHIVE && c.ivalue == 3);
    CHECK(parse("/unarchive 2", &c, err) == 0 && c.kind == UI_CMD_UNARCHIVE && c.ivalue == 2);
    CHECK(parse("/delete 1", &c, err) == 0 && c.kind == UI_CMD_DELETE && c.ivalue == 1);
    CHECK(parse("/tab 12", &c, err) == 0 && c.kind == UI_CMD_TAB && c.ivalue == 12);
    /* /model N picks from the list; anything else is a path */
    CHECK(parse("/model 3 ", &c, err) == 0 && c.kind == UI_CMD_MODEL && c.ivalue == 3);
    CHECK(parse("/model 12", &c, err) == 0 && c.ivalue == 12);
    CHECK(parse("/model ./3", &c, err) == 0 && c.ivalue == 0 && c.arg_len == 3 && !strncmp(c.arg, "./3", 3));
    CHECK(parse("/model /m/7b.gguf", &c, err) == 0 && c.ivalue == 0 && c.arg_len == 10);
    CHECK(parse("/model 2x.gguf", &c, err) == 0 && c.ivalue == 0 && c.arg_len == 7);
    CHECK(parse("/model default", &c, err) == 0 && c.ivalue == 0 && c.arg_len == 7);
}

static void test_errors(void) {
    ui_cmd c;
    char err[128];
    struct { const char *in, *want; } bad[] = {
        {"/frobnicate", "unknown command"},
        {"/model 0", "not an entry of the list"},
        {"/model 1000", "not an entry of the list"},
        {"/model 99999999999999999999999", "not an entry of the list"},
        {"/copy everything", "/copy code"},
        {"/copy 0", "/copy N message N"},
        {"/copy 99999999999999999999", "/copy N message N"},
        {"/copy code 0", "/copy code [K]"},
        {"/copy code x", "/copy code [K]"},
        {"/copy code 2 3", "/copy code [K]"},
        {"/copy 2 words", "/copy N code [K]"},
        {"/role two words", "/role NAME"},
        {"/think maybe", "/think on|off"},
        {"/think", "/think"},
        {"/set temp hot", "not a number"},
        {"/set temp -1", "not a number"},
        {"/set top_p 1.5", "not a number"},
        {"/set top_k 2.5", "whole number"},
        {"/set max_tokens 0", "whole number"},
        {"/set color red", "unknown setting"},
        {"/set temp", "usage"},
        {"/set temp 1 2", "one value"},
        {"/n", "needs a number"},
        {"/n 0", "whole number"},
        {"/n 99", "whole number"},
        {"/beam x", "whole number"},
        {"/regen now", "takes no argument"},
        {"/rename", "needs some text"},
        {"/search   ", "needs some text"},
        {"/file", "needs some text"},
        {"/a-very-long-command-name-that-goes-on", "unknown command"},
        {"/branch sideways", "next|prev"},
        {"/sessions all", "--all"},
        {"/delete", "needs a number"},
        {"/archive x", "a session's number in the last /sessions or /search list"},
        {"/delete 0", "/delete N: '0' is not an entry (N: a session's number"},
        {"/open -3", "/open N: '-3' is not an entry"},
        {"/tab 0", "whole number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        CHECKF(parse(bad[i].in, &c, err) == -1 && strstr(err, bad[i].want), "%s -> %s", bad[i].in, err);
        CHECKF(!strstr(err, "4611686018427387904"), "%s -> %s", bad[i].in, err); /* (the list's limit) */
        CHECK(strchr(err, '\n') == NULL);
    }
    CHECK(strstr(ui_help_text(), "/regen") && strstr(ui_help_text(), "Ctrl-T"));
    const char *listed[] = {"/branch next|prev", "/system --clear", "/archive N", "/unarchive N", "/delete N",
                            "/tab N", "/sessions [--all]", "Alt-0", "Esc"};
    for (size_t i = 0; i < sizeof listed / sizeof *listed; i++) CHECKF(strstr(ui_help_text(), listed[i]), "%s", listed[i]);
}

int main(void) {
    RUN(test_messages_and_escape);
    RUN(test_commands_with_values);
    RUN(test_errors);
    return t_summary();
}
