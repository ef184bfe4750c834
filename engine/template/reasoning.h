/* reasoning.h — a thinking model's reasoning kept apart from its answer: which
 * format a model writes it in (from its chat template), and a parser that splits
 * the answer's text as it streams.
 *
 * Formats
 * -------
 * THINK    <think>REASONING</think>ANSWER (Qwen3, QwQ, DeepSeek-R1 and its
 *          distills, SmolLM3, GLM, MiniCPM, ...). A template that opens the block
 *          itself at the end of the prompt (reasoning_prompt_opens) starts the
 *          parser inside it; otherwise the answer opens it, after optional
 *          whitespace, or has no reasoning at all. MiniMax-M1's template shows
 *          no block, but its model writes one: its turn markers say THINK.
 * MINIMAX  MiniMax-M3: the same with <mm:think>REASONING</mm:think>; an answer
 *          without thinking starts with a bare </mm:think> (dropped), as its
 *          template's "disabled" mode writes it into the prompt.
 * HARMONY  gpt-oss: messages "<|channel|>NAME<|message|>TEXT<|end|>", each after
 *          an optional "<|start|>assistant"; the analysis channel is reasoning,
 *          the final channel (and commentary) the answer; a message to a
 *          function ("to=functions.N") goes on to the answer from "to=" through
 *          its <|call|>, for the tool-call reader (toolcall.h's HARMONY). Its
 *          markers are control tokens: the request must render them
 *          (gen_request.special_text).
 * The other templates that write a block, each with its own markers (those
 * marked * are control tokens, shown by special_text as harmony's):
 * GRANITE    Granite 3.3: <think>R</think><response>A</response> (the response
 *            tags dropped)
 * MISTRAL    Ministral 3 / Magistral: [THINK]R[/THINK]A *
 * COMMAND_A  Cohere Command-A reasoning (Cohere2MoE): <|START_THINKING|>R
 *            <|END_THINKING|><|START_RESPONSE|>A<|END_RESPONSE|> * (its template
 *            opens the block in the prompt; <|START_TEXT|>/<|END_TEXT|> too)
 * GEMMA4     Gemma 4: <|channel>thought\nR<channel|>A * (thinking off, the
 *            prompt ends with an empty block: the answer is all content)
 * KIMI_K3    Kimi K3: <|open|>think<|sep|>R<|close|>think<|sep|><|open|>response
 *            <|sep|>A<|close|>response<|sep|> * (the prompt opens think, or
 *            response when thinking is off: the parser starts in the answer)
 * HUNYUAN    tencent Hy3: <think:opensource>R</think:opensource>A *
 * SOLAR      Solar Open: <|think|>R<|end|><|begin|>assistant<|content|>A *
 * APERTUS    Apertus: <|inner_prefix|>R<|inner_suffix|>A *
 * APRIEL     ServiceNow Apriel: the prompt ends "Here are my reasoning steps:\n",
 *            so the answer starts inside; R[BEGIN FINAL RESPONSE]A[END FINAL
 *            RESPONSE] (plain text)
 * The answer's wrapper markup of a format (the response tags above) is dropped
 * from the content with the whitespace before it; what follows it (Kimi K3's
 * tools block, Apriel's <tool_calls>) goes on to the tool-call reader.
 *
 * The parser is fed the answer's pieces as they come and hands each decided run
 * of text to the sink: reasoning or content. Markup never shows: a piece that may
 * still be the start of a marker is held until decided. Whitespace around the
 * reasoning (and between it and the answer) is dropped, so "<think>\nI plan.\n
 * </think>\n\nHello." gives reasoning "I plan." and content "Hello.". At the end
 * (reasoning_finish) held text is released: a reasoning block cut off by the
 * length limit stays reasoning; a harmony header cut off is markup, dropped. */
#ifndef LLC_REASONING_H
#define LLC_REASONING_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/tokenizer/tokenizer.h"
#include "kernels/common.h"

typedef enum reasoning_format {
    REASONING_NONE,    /* no reasoning markup: everything is the answer */
    REASONING_THINK,
    REASONING_HARMONY,
    REASONING_MINIMAX,
    REASONING_GRANITE,
    REASONING_MISTRAL,
    REASONING_COMMAND_A,
    REASONING_GEMMA4,
    REASONING_KIMI_K3,
    REASONING_HUNYUAN,
    REASONING_SOLAR,
    REASONING_APERTUS,
    REASONING_APRIEL,
    REASONING_N_FORMATS /* (a count, not a format) */
} reasoning_format;

/* The reasoning format of a Jinja chat template, by its markers (NULL: NONE). */
reasoning_format reasoning_detect(const char *jinja_src);
/* "none", "think", "harmony", "minimax", "granite", "mistral", "command_a",
 * "gemma4", "kimi_k3", "hunyuan", "solar", "apertus", "apriel". */
const char *reasoning_format_name(reasoning_format f);
/* Whether the format's markers are control tokens, which the answer must show
 * for the parser to see them (gen_request.special_text). */
bool reasoning_special_text(reasoning_format f);
/* The word the format's template takes for the API's reasoning_effort "low",
 * "medium" or "high": the effort itself, except where a template has levels of
 * its own (Hy3 knows only no_think/low/high: "medium" asks for "high"). */
const char *reasoning_effort_word(reasoning_format f, const char *effort);
/* Whether a rendered prompt leaves the model inside a reasoning block: it ends
 * with the block's opening marker (THINK: "<think>"; APRIEL: "Here are my
 * reasoning steps:") and optional whitespace. */
bool reasoning_prompt_opens(reasoning_format f, const char *prompt);
/* The same for prompt tokens (the last 64, rendered with their special tokens):
 * what the server and the chat ask before they start a parser. */
bool reasoning_prompt_ids_open(reasoning_format f, const tokenizer *tok, const int32_t *ids, int n);

/* Where the parser's text goes (callbacks may be NULL; text not NUL-terminated). */
typedef struct reasoning_sink {
    void *ud;
    void (*reasoning)(void *ud, const char *text, size_t len);
    void (*content)(void *ud, const char *text, size_t len);
} reasoning_sink;

typedef struct reasoning_parser reasoning_parser;

/* A parser for one answer; in_reasoning: the prompt opened the block. A NONE
 * parser passes everything to content. 0 or LLC_ERR_NOMEM. */
int reasoning_parser_create(reasoning_format f, bool in_reasoning, const reasoning_sink *sink,
                            reasoning_parser **out);
void reasoning_parser_free(reasoning_parser *p);
/* The next piece of the answer. 0, or LLC_ERR_NOMEM. */
int reasoning_feed(reasoning_parser *p, const char *text, size_t len);
/* The answer is over: held text goes where it was heading. */
int reasoning_finish(reasoning_parser *p);
/* How many pieces (reasoning_feed calls with text) were fed while the parser
 * was inside the reasoning, before or after the piece: the reasoning's token
 * count, its markers included, when each piece is one token. */
int reasoning_pieces(const reasoning_parser *p);

#endif
