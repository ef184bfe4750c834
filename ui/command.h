/* command.h — the chat's slash commands: parsing a line of input into a command
 * with a checked argument, and the help text that lists them and the keys.
 * Pure (no curses, no engine) so every command and every bad value is tested. */
#ifndef LLC_UI_COMMAND_H
#define LLC_UI_COMMAND_H

#include <stddef.h>

typedef enum ui_cmd_kind {
    UI_CMD_MESSAGE, /* not a command: text to send ("//x" sends "/x") */
    UI_CMD_SYSTEM,  /* /system [TEXT]: set it; none: show it; ivalue 1: --clear */
    UI_CMD_SET,     /* /set KEY VALUE; /set alone shows the values (key UI_SET_SHOW) */
    UI_CMD_N,       /* /n K: K parallel answers */
    UI_CMD_ALT,     /* /alt [K]: next alternative answer, or the K-th */
    UI_CMD_BEAM,    /* /beam W (0 or 1 turns beam search off) */
    UI_CMD_REGEN,   /* /regen */
    UI_CMD_EDIT,    /* /edit: edit the last user message and branch */
    UI_CMD_BRANCH,  /* /branch: new tab from the current point; /branch next|prev
                       (ivalue +1 / -1): the other versions of your message */
    UI_CMD_RENAME,  /* /rename TITLE */
    UI_CMD_SESSIONS,/* /sessions [--all]: list (ivalue 1: archived ones too) */
    UI_CMD_ARCHIVE, /* /archive N: hide session N of the list (kept) */
    UI_CMD_UNARCHIVE,/* /unarchive N: list it again */
    UI_CMD_DELETE,  /* /delete N: delete session N for good (asked twice) */
    UI_CMD_TAB,     /* /tab N: switch to tab N */
    UI_CMD_OPEN,    /* /open N: reopen session N of the list (or by id) */
    UI_CMD_SEARCH,  /* /search TEXT */
    UI_CMD_EXPORT,  /* /export [FILE.md] */
    UI_CMD_FILE,    /* /file PATH: a text file into the input box */
    UI_CMD_STATS,   /* /stats */
    UI_CMD_MODEL,   /* /model [PATH]: show the tab's model and the list, or switch it;
                       /model N (ivalue N, 1..999): entry N of that list */
    UI_CMD_COPY,    /* /copy [N] [code [K]]: the last answer, or (ivalue N) message N, 1 the first
                       shown, to the clipboard; block -1: its last code block, K: code block K */
    UI_CMD_ROLE,    /* /role [NAME]: apply a role of the config (its system prompt); alone: list them */
    UI_CMD_REASONING, /* /reasoning: unfold (or fold again) the last answer's reasoning */
    UI_CMD_THINK,   /* /think on|off: a thinking model thinks (ivalue 1) or not (0), per tab */
    UI_CMD_NEW,     /* /new: new tab */
    UI_CMD_CLOSE,   /* /close: close the tab (the session stays) */
    UI_CMD_HELP,    /* /help */
    UI_CMD_QUIT,    /* /quit */
} ui_cmd_kind;

typedef enum ui_set_key {
    UI_SET_TEMP, UI_SET_TOP_P, UI_SET_TOP_K, UI_SET_MIN_P, UI_SET_MAX_TOKENS, UI_SET_SEED,
    UI_SET_SHOW, /* /set alone: show the values */
} ui_set_key;

typedef struct ui_cmd {
    ui_cmd_kind kind;
    const char *arg;   /* text argument (points into the input), trimmed; "" if none */
    size_t arg_len;
    ui_set_key key;    /* UI_CMD_SET */
    double value;      /* UI_CMD_SET (temp, top_p, min_p) */
    long long ivalue;  /* UI_CMD_SET (top_k, max_tokens, seed), /n, /beam, /alt, /open, /tab,
                          /archive, /unarchive, /delete; flags of /system, /branch, /sessions */
    int block;         /* /copy: 0 the text; -1 the last code block; K code block K */
} ui_cmd;

/* Parses one line of input. Returns 0 with *out filled, or -1 with a one-line
 * message in err (unknown command, missing or bad value) — the input is then
 * not sent anywhere. */
int ui_cmd_parse(const char *text, size_t len, ui_cmd *out, char *err, size_t err_size);

/* The text /help and F1 show: commands and keys, one per line. */
const char *ui_help_text(void);

#endif
