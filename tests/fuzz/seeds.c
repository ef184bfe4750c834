/* seeds.c — writes the starting corpora of the fuzz targets (`make fuzz`):
 *   OUT/gguf/       small GGUF files: a SentencePiece and a BPE toy vocabulary,
 *                   random-weight llama models on the first (F32, Q8_0, Q4_K),
 *                   and a file with every metadata type, nested arrays, GGUF v2
 *                   and alignment 1
 *   OUT/tokenizer/  the inputs of the ../shared/vocab .inp files, one file each, behind a
 *                   selector byte (vocabulary and flags, see fuzz_tokenizer.c)
 *   OUT/json/       request bodies of every dialect behind their selector byte
 * Usage: seeds OUT (LLC_SHARED as in the tests). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/gguf/gguf_write.h"
#include "engine/model/modelgen.h"

static const char *g_out;
static int g_n;

static void put(const char *dir, const char *name, const void *data, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", g_out, dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "seeds: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    g_n++;
}

static void check(int rc, const llc_err *err) {
    if (rc) {
        fprintf(stderr, "seeds: %s\n", err->msg);
        exit(1);
    }
}

/* A SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens, some pieces. */
static void vocab_spm(gguf_writer *w) {
    static const char *const pieces[] = {"\xe2\x96\x81", "\xe2\x96\x81the", "\xe2\x96\x81" "a", "he", "ll",
                                         "o", "\xe2\x96\x81Hello", "\xe2\x96\x81world", "<|im_start|>"};
    enum { N = 3 + 256 + sizeof pieces / sizeof pieces[0] };
    static char bytes[256][8];
    const char *toks[N];
    float scores[N];
    int32_t types[N];
    toks[0] = "<unk>", toks[1] = "<s>", toks[2] = "</s>";
    types[0] = 2, types[1] = 3, types[2] = 3;
    for (int i = 0; i < 256; i++) {
        snprintf(bytes[i], sizeof bytes[i], "<0x%02X>", i);
        toks[3 + i] = bytes[i];
        types[3 + i] = 6;
    }
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        toks[259 + i] = pieces[i];
        types[259 + i] = i + 1 == sizeof pieces / sizeof pieces[0] ? 4 : 1;
    }
    for (int i = 0; i < N; i++) scores[i] = -(float)i;
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, N);
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, N);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, N);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
    gguf_w_str(w, "tokenizer.chat_template", "{% for message in messages %}<|im_start|>{{ message.role }}");
}

/* A byte-level BPE vocabulary (gpt2): the 256 byte symbols, a few merges. */
static void vocab_bpe(gguf_writer *w) {
    static char sym[256][8];
    const char *toks[256 + 4];
    int n = 0;
    for (int b = 0; b < 256; b++) { /* GPT-2's byte-to-unicode map */
        int cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174) ? b : 256 + n++;
        if (cp < 0x80) sym[b][0] = (char)cp, sym[b][1] = 0;
        else sym[b][0] = (char)(0xC0 | cp >> 6), sym[b][1] = (char)(0x80 | (cp & 0x3F)), sym[b][2] = 0;
        toks[b] = sym[b];
    }
    toks[256] = "he", toks[257] = "ll", toks[258] = "\xc4\xa0the", toks[259] = "<|endoftext|>";
    int32_t types[260];
    for (int i = 0; i < 260; i++) types[i] = i == 259 ? 3 : 1;
    const char *merges[] = {"h e", "l l", "\xc4\xa0 t", "\xc4\xa0t h"};
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "gpt-2");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 260);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 260);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 4);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 259);
}

static void write_gguf(gguf_writer *w, const char *name) {
    uint8_t *buf;
    size_t size;
    llc_err err;
    check(gguf_writer_to_memory(w, &buf, &size, &err), &err);
    put("gguf", name, buf, size);
    free(buf);
    gguf_writer_free(w);
}

static void gguf_seeds(void) {
    gguf_writer *w;
    gguf_writer_create(&w);
    vocab_spm(w);
    write_gguf(w, "vocab_spm.gguf");
    gguf_writer_create(&w);
    vocab_bpe(w);
    write_gguf(w, "vocab_bpe.gguf");

    /* models on the SentencePiece vocabulary, which modelgen copies from a file */
    char vocab[1024], path[1024];
    snprintf(vocab, sizeof vocab, "%s/gguf/vocab_spm.gguf", g_out);
    static const char *const types[] = {"f32", "q8_0", "q4_k"};
    for (int i = 0; i < 3; i++) {
        modelgen_params p = {.arch = "llama", .dim = 32, .n_layers = 1, .n_heads = 2, .n_kv_heads = 1,
                             .ffn_dim = 64, .n_ctx = 64, .rope_base = 10000, .wtype = types[i],
                             .seed = 7, .vocab_path = vocab};
        if (i == 2) p.dim = 256, p.ffn_dim = 256, p.n_heads = 4; /* K quants: rows of 256 */
        snprintf(path, sizeof path, "%s/gguf/model_%s.gguf", g_out, types[i]);
        llc_err err;
        check(modelgen_write(&p, path, &err), &err);
        g_n++;
    }

    /* every metadata type, nested arrays, v2, alignment 1, an odd-sized tensor */
    for (int v = 2; v <= 3; v++) {
        gguf_writer_create(&w);
        gguf_writer_set_version(w, (uint32_t)v);
        if (v == 3) gguf_writer_set_alignment(w, 1);
        gguf_w_u32(w, "a.u32", 7);
        gguf_w_i32(w, "a.i32", -7);
        gguf_w_f32(w, "a.f32", 0.5f);
        gguf_w_bool(w, "a.bool", true);
        gguf_w_str(w, "a.str", "text");
        int64_t i64s[3] = {1, -2, 3};
        double f64s[2] = {1.5, -2.5};
        uint8_t u8s[4] = {1, 2, 3, 255};
        gguf_w_arr(w, "a.i64s", GGUF_TYPE_INT64, i64s, 3);
        gguf_w_arr(w, "a.f64s", GGUF_TYPE_FLOAT64, f64s, 2);
        gguf_w_arr(w, "a.u8s", GGUF_TYPE_UINT8, u8s, 4);
        const char *strs[] = {"x", "", "yz"};
        gguf_w_arr_str(w, "a.strs", strs, 3);
        static float data[3 * 5];
        for (int i = 0; i < 15; i++) data[i] = (float)i;
        int64_t ne[2] = {3, 5};
        gguf_w_tensor(w, "t.odd", 2, ne, 0 /* F32 */, data);
        int64_t ne1[1] = {4};
        gguf_w_tensor(w, "t.vec", 1, ne1, 0, data);
        write_gguf(w, v == 2 ? "meta_v2.gguf" : "meta_v3_align1.gguf");
    }
}

/* The tokenizer test inputs, each behind a selector byte (vocabulary, flags). */
static void tokenizer_seeds(void) {
    /* index = fuzz_tokenizer's k_vocabs order; absent names are skipped */
    static const char *const names[] = {"llama-spm", "gpt-2", "phi-3", "deepseek-llm", "starcoder",
                                        "falcon", "baichuan", "gemma-4", "qwen35", "llama-bpe"};
    const char *shared = getenv("LLC_SHARED");
    if (!shared || !*shared) shared = "../shared";
    for (int v = 0; v < (int)(sizeof names / sizeof *names); v++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf.inp", shared, names[v]);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        static char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *sep = "\n__ggml_vocab_test__\n";
        int k = 0;
        for (char *s = buf; s && *s && k < 40; k++) {
            char *e = strstr(s, sep);
            size_t len = e ? (size_t)(e - s) : strlen(s);
            char item[4096], name[64];
            if (len > sizeof item - 1) len = sizeof item - 1;
            /* the selector: byte % count = vocabulary (fuzz_tokenizer's order), bits
             * 0x10 and 0x20 the flags */
            const int n_names = (int)(sizeof names / sizeof *names), flags = (k % 4) << 4;
            int sel = 0;
            while (sel < 255 && (sel % n_names != v || (sel & 0x30) != flags)) sel++;
            item[0] = (char)sel;
            memcpy(item + 1, s, len);
            snprintf(name, sizeof name, "%s-%02d", names[v], k);
            put("tokenizer", name, item, len + 1);
            s = e ? e + strlen(sep) : NULL;
        }
    }
}

static void json_seeds(void) {
    static const struct { unsigned sel; const char *body; } bodies[] = {
        {0x00, "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"}],"
               "\"max_tokens\":8,\"temperature\":0.7,\"top_k\":40,\"top_p\":0.9,\"seed\":3,\"n\":2,\"stop\":[\"\\n\"]}"},
        {0x00, "{\"prompt\":\"Once upon a time\",\"beam_width\":4,\"n\":2,\"priority\":5,\"logprobs\":3,\"return_prompt\":true}"},
        {0x04, "{\"prefix\":\"def f(x):\\n\",\"suffix\":\"\\n\",\"prompt\":\"ret\",\"extra\":[{\"filename\":\"a.py\",\"text\":\"x=1\"}]}"},
        {0x01, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"}]},"
               "{\"role\":\"assistant\",\"content\":null}],\"logprobs\":true,\"top_logprobs\":2,\"max_completion_tokens\":4}"},
        {0x02, "{\"prompt\":[\"Hello\"],\"max_tokens\":3,\"logprobs\":1,\"frequency_penalty\":0.5,\"presence_penalty\":-0.5}"},
        {0x03, "{\"prompt\":[1,2,3,4],\"n_predict\":0,\"n_probs\":2,\"samplers\":[\"top_k\",\"temperature\"],\"t_max_predict_ms\":500}"},
        {0x07, "{\"input_prefix\":\"int main() {\",\"input_suffix\":\"}\",\"input_extra\":[{\"filename\":\"x.c\",\"text\":\"//\"}],"
               "\"prompt\":\"\",\"n_predict\":4,\"repeat_penalty\":1.1,\"repeat_last_n\":64,\"min_p\":0.05}"},
        {0x08, "{\"messages\":[{\"role\":\"user\",\"content\":\"<s>[INST] hi\"}],\"stop\":\"END\",\"seed\":-1}"},
        {0x01, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
               "\"json_schema\":{\"name\":\"p\",\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}}}"},
        {0x03, "{\"prompt\":\"x\",\"grammar\":\"root ::= [a-z]{2,5} \\\"!\\\"\",\"n_predict\":4}"},
        {0x02, "{\"prompt\":\"x\",\"json_schema\":{\"enum\":[1,\"a\"]},\"response_format\":{\"type\":\"text\"}}"},
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        char item[1024], name[32];
        size_t len = strlen(bodies[i].body);
        item[0] = (char)bodies[i].sel;
        memcpy(item + 1, bodies[i].body, len);
        snprintf(name, sizeof name, "req-%02zu", i);
        put("json", name, item, len + 1);
    }
}

static void grammar_seeds(void) {
    static const char *const items[] = {
        "root ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\npair ::= [a-z]+ \":\" ws [0-9]{1,3}\nws ::= [ \\t\\n]*\n\0{a: 12, b:3}",
        "root ::= (\"é\" | [^\\x00-\\x7F] | .)+ \"!\"?\n\0é€😀!",
        "# comment\nroot ::= x{2,4} y?\nx ::= [a-c] | \"\\u0041\"\ny ::= \"\\x21\"\n\0abcA!",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":99},"
        "\"b\":{\"enum\":[\"x\",null,true]},\"c\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
        "\"maxLength\":3},\"maxItems\":2}},\"required\":[\"a\"]}\0{\"a\":12,\"c\":[\"ab\"]}",
        "{\"$ref\":\"#/$defs/n\",\"$defs\":{\"n\":{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"array\","
        "\"items\":{\"$ref\":\"#/$defs/n\"}}]}}}\0[1,[2.5e3,[]]]",
    };
    for (size_t i = 0; i < sizeof items / sizeof *items; i++) {
        char name[32];
        const char *nul = strchr(items[i], 0); /* the grammar part */
        size_t len = (size_t)(nul - items[i]) + 1 + strlen(nul + 1);
        snprintf(name, sizeof name, "grammar-%02zu", i);
        put("grammar", name, items[i], len);
    }
}

/* answers of thinking models and tool calls: selector (reasoning format & 3 |
 * opened | tools | tool format << 4), the reasoning format / 4 (the step byte's
 * high bits), the text */
static void answer_seeds(void) {
    static const struct {
        unsigned char sel, hi;
        const char *text;
    } items[] = {
        {0x01, 0, "<think>\nI plan.\n</think>\n\nHello there."},
        {0x05, 0, "I plan.\n</think>\n\nHi <tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>"},
        {0x19, 0, "<think>a</think><tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": [1, \"}\"]}}\n</tool_call>"},
        {0x4a, 0, "<|channel|>analysis<|message|>Need f.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.f <|constrain|>json<|message|>{\"a\":1}<|call|>"},
        {0x02, 0, "<|channel|>final<|message|>Hi<|return|>"},
        {0x39, 0, "[TOOL_CALLS]f[ARGS]{\"a\": 1}"},
        {0x29, 0, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}"},
        {0x58, 0, "Hi\n<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\nx <y>\n</parameter>\n"
               "</function>\n</tool_call>"},
        {0x68, 0, "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>{\"k\": [1]}</arg_value>\n</tool_call>"},
        {0x78, 0, "<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"a\">v</parameter>\n</invoke>\n"
               "</minimax:tool_call>"},
        {0x89, 0, "<think>a</think><tool_calls>\n{\"name\": \"f\", \"arguments\": {}}\n{\"name\": \"g\"}\n</tool_calls>"},
        {0x9b, 0, "</mm:think>]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"f\">]<]minimax[>[<a>]<]minimax[>["
               "<item>1]<]minimax[>[</item>]<]minimax[>[</a>]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>"},
        /* Apriel (12), Command-A (6), Kimi K3 (8), Solar (10), Hy3 (9), Gemma 4 (7) */
        {0x8c, 3, "I plan.\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{\"name\": \"f\", \"arguments\": {}}]</tool_calls>\n"
                  "[END FINAL RESPONSE]"},
        {0xde, 1, "Need f.<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"f\", "
                  "\"parameters\": {\"a\": 1}}]<|END_ACTION|>"},
        {0x04, 2, "a<|close|>think<|sep|><|open|>response<|sep|>Hi <|close|>response<|sep|><|close|>message<|sep|>"},
        {0xca, 2, "<|think|>x<|end|><|begin|>assistant<|tool_calls|><|tool_call:begin|>c1<|tool_call:name|>f"
                  "<|tool_call:args|>{}<|tool_call:end|><|calls|>"},
        {0xa9, 2, "<think:opensource>r</think:opensource><tool_calls:opensource>\n<tool_call:opensource>f"
                  "<tool_sep:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>"},
        {0xb9, 0, "<think>r</think><|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
                  "<|tool_call_argument_begin|>{\"x\": [1]}<|tool_call_end|><|tool_calls_section_end|>"},
        {0xeb, 1, "<|channel>thought\nx<channel|><|tool_call>call:f{a:<|\"|>t, \"u\"<|\"|>,b:[1,{c:x}]}<tool_call|>"},
    };
    for (size_t i = 0; i < sizeof items / sizeof *items; i++) {
        char name[32], buf[512];
        size_t len = strlen(items[i].text);
        buf[0] = (char)items[i].sel;
        buf[1] = (char)(items[i].hi << 4 | ((3 + i) & 15));
        memcpy(buf + 2, items[i].text, len);
        snprintf(name, sizeof name, "answer-%02zu", i);
        put("answer", name, buf, len + 2);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: seeds OUT\n");
        return 2;
    }
    g_out = argv[1];
    static const char *const dirs[] = {"", "/gguf", "/tokenizer", "/json", "/grammar", "/answer"};
    for (int i = 0; i < 6; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s%s", g_out, dirs[i]);
        if (mkdir(path, 0755) && errno != EEXIST) {
            fprintf(stderr, "seeds: %s: %s\n", path, strerror(errno));
            return 1;
        }
    }
    gguf_seeds();
    tokenizer_seeds();
    json_seeds();
    grammar_seeds();
    answer_seeds();
    printf("seeds: %d files under %s\n", g_n, g_out);
    return 0;
}
