/* conv.h — one open conversation (a tab) in memory: the messages along its
 * active path, the alternative answers to the last user message (parallel
 * answers, regenerations), its generation settings, and keeping all of it in
 * the database. No curses here.
 *
 * Writes go to the database as they happen; when the database refuses (locked,
 * full, read-only, missing) the conversation goes on in memory and
 * conv_save() is called again later: messages not yet stored are added in
 * order, changed ones are updated. Nothing in memory is dropped because a save
 * failed.
 *
 * Shared by the chat UI (one per tab) and the socket server (stored sessions),
 * so both store and prompt a conversation the same way. The view state below
 * (wrap cache, scroll, /edit) is the UI's; nothing here reads it. */
#ifndef LLC_STORAGE_CONV_H
#define LLC_STORAGE_CONV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/common.h"
#include "engine/template/chat.h"
#include "storage/db.h"
#include "storage/text_lines.h"

typedef struct conv_msg {
    int64_t id;          /* database id; 0 while not stored */
    int role;            /* DB_ROLE_USER / DB_ROLE_ASSISTANT */
    int state;           /* DB_STATE_* */
    char *text;          /* NUL-terminated */
    size_t len, cap;
    bool dirty;          /* text or state changed since the last save */
    char *reasoning;     /* a thinking model's reasoning before the answer (NULL: none) */
    size_t r_len, r_cap;
    bool reasoning_dirty; /* changed since the last save (dirty is set too) */
    bool reasoning_shown; /* the view unfolds it (the UI's; not stored) */
    double reasoning_t0;  /* when its reasoning began streaming, ms, while it does (the clock
                             for usage.reasoning_ms: conv_reasoning_clock) */
    tw_lines r_wrap;      /* the view's wrap of it */
    db_usage usage;
    char finish[16];     /* "stop", "length", "cancelled", "error", "" */
    char error[256];     /* why it failed, when it did (shown, not stored) */
    int version, n_versions; /* a user message: it is version `version` (1-based) of
                                n_versions at its point of the tree (0: not counted; the UI's) */
    /* the view's wrap cache */
    tw_lines wrap;
    int wrap_width;
    size_t wrap_len;
    void *view;                 /* the view's own cache (laid-out Markdown), freed with view_free */
    void (*view_free)(void *);
} conv_msg;

typedef struct conv_settings {
    float temperature, top_p, min_p;
    int top_k, max_tokens; /* max_tokens 0: not set (a server chooses; locally CONV_MAX_TOKENS) */
    uint64_t seed;       /* SAMPLER_SEED_RANDOM: a new one each answer */
    int n, beam;         /* parallel answers; beam width (0: sample) */
    bool no_think;       /* /think off: the template renders with enable_thinking false */
} conv_settings;

typedef struct conv {
    int64_t session_id;  /* 0 while not stored */
    char *title;
    char *system;        /* "" when none */
    conv_settings set;
    bool meta_dirty;     /* title/system/settings not yet stored */
    conv_msg **msgs;     /* the active path, without the final answers */
    int n_msgs, cap_msgs;
    conv_msg **alts;     /* answers to the last user message (siblings) */
    int n_alts, alt_cur;
    /* generation in flight */
    int64_t req_id;      /* 0 when idle */
    int alt_base;        /* sample i streams into alts[alt_base + i] */
    int n_streaming;
    int dropped_turns;   /* turns left out of the last prompt to fit the context */
    double last_save_ms;
    int64_t leaf_saved;  /* the active leaf last stored (0: unknown) */
    char save_error[320];/* why the last save failed ("" when saved) */
    char *model;         /* the model file this session answers with ("" : the default) */
    struct provider *prov; /* the provider answering it now (NULL: the app's default) */
    char *model_prev;    /* while /model opens another model: the tab's model before (NULL: none),
                            which it keeps if that one cannot be opened */
    char *queued;        /* a message sent while the answer streams: it goes when the answer ends */
    size_t queued_len;
    /* view state */
    char *draft;         /* what is typed in the input box while another tab is shown (NULL: nothing) */
    int64_t focus_id;    /* a message the view scrolls to at its next draw (0: none) */
    int scroll;          /* lines up from the bottom */
    int scroll_rows;     /* the transcript's rows at the last draw (holds a scrolled view still) */
    bool titled;         /* /rename named it: the first message does not replace the title */
    bool editing;        /* /edit: the next message replaces the last user message */
} conv;

conv_settings conv_default_settings(void);
/* The answer length used when /set max_tokens did not set one (the local
 * engine's; a remote server is left to choose its own). */
#define CONV_MAX_TOKENS 512
int conv_max_tokens(const conv_settings *s); /* max_tokens, or CONV_MAX_TOKENS when not set */

/* A new, empty conversation (not stored until it has a message). */
int conv_create(const char *title, conv **out);
void conv_free(conv *c);
/* Loads session id: its settings and active path; the answers to the last user
 * message become the alternatives. */
int conv_load(db *d, int64_t session_id, conv **out, llc_err *err);

/* Settings as stored in the session's params_json, and back. */
char *conv_settings_to_json(const conv_settings *s);
void conv_settings_from_json(const char *json, conv_settings *s);

/* The last message shown: the current alternative, else the last on the path. */
conv_msg *conv_last(const conv *c);
/* Shown messages in order: index < conv_n_shown. */
int conv_n_shown(const conv *c);
conv_msg *conv_shown(const conv *c, int i);

/* Appends the user's message (it becomes part of the path; the current
 * alternative is kept, the others leave memory — they stay in the database). */
int conv_add_user(conv *c, const char *text, size_t len);
/* Opens k empty answers (alternatives) for a generation; returns the index of the first. */
int conv_open_answers(conv *c, int k);
/* Appends streamed text to alternative i. */
int conv_append(conv *c, int alt, const char *text, size_t len);
/* Appends streamed reasoning to alternative i (stored beside its text; later
 * prompts carry it apart, chat_msg.reasoning, for the template to show or drop). */
int conv_append_reasoning(conv *c, int alt, const char *text, size_t len);
/* A piece of answer m arrived at now_ms: of its reasoning (the clock starts at
 * the first and runs to the last) or of its text (the clock stops), so that
 * usage.reasoning_ms is how long the reasoning streamed ("thought for 4.2 s";
 * the chat and the server's sessions both keep it). */
void conv_reasoning_clock(conv_msg *m, bool reasoning, double now_ms);
/* Marks alternative i finished; usage (may be NULL) replaces its numbers, but a
 * reasoning size or time the caller measured while it streamed stays unless
 * usage has its own. */
void conv_finish(conv *c, int alt, int state, const char *finish, const db_usage *usage);
/* Forgets the last user message and its answers from memory (for /edit: the
 * edited message becomes a sibling of it). Returns the parent id it had. */
int64_t conv_drop_last_user(conv *c);

/* A streaming answer is stored at most this often (a crash loses at most about
 * this much of it, plus one UI tick). */
#define CONV_STREAM_SAVE_MS 250
/* Stores what is not stored yet. force: also streaming text that changed less
 * than CONV_STREAM_SAVE_MS ago. Returns 0, or a negative code with c->save_error set. */
int conv_save(conv *c, db *d, const char *model_name, bool force, double now_ms);
/* True while something is not stored. */
bool conv_unsaved(const conv *c);

/* The conversation as shown (title, system prompt, the path and the current
 * answer, reasoning quoted) as Markdown into f: what a recovery file keeps when
 * the database refuses it. 0 or LLC_ERR_IO. */
int conv_write_markdown(const conv *c, FILE *f);

/* The messages for the prompt: system (if any) then the path and the current
 * alternative, up to and including the last user message. A failed or empty
 * answer is left out, and the user's messages around it become one turn (the
 * roles still alternate). *out is one allocation: free(*out) frees it all. */
int conv_chat_msgs(const conv *c, chat_msg **out, int *n);
/* The same for the conversation once next is sent after the answer shown
 * (with /edit: instead of the last user message). */
int conv_chat_msgs_next(const conv *c, const char *next, chat_msg **out, int *n);

#endif
