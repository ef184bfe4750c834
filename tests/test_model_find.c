/* test_model_find.c — model_find on a made-up home folder holding each store's
 * layout: Hugging Face snapshots (with a projector and a split file's later
 * part left out), Ollama manifests (library and hf.co names; one whose blob is
 * missing), llama.cpp's cache and LM Studio. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/test.h"
#include "ui/model_find.h"

static char g_home[256];

/* Creates the file HOME/rel (and its folders) holding text. */
static void put(const char *rel, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_home, rel);
    for (char *p = path + strlen(g_home) + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(path, 0700);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static const char *path_of(const found_model *m, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(m[i].name, name)) return m[i].path;
    return NULL;
}

static bool ends(const char *s, const char *suffix) {
    return s && strlen(s) >= strlen(suffix) && !strcmp(s + strlen(s) - strlen(suffix), suffix);
}

static const char MANIFEST[] =
    "{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.template\","
    "\"digest\":\"sha256:t1\"},{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":\"sha256:%s\"}]}";

static void test_every_store(void) {
    const char *hf = ".cache/huggingface/hub/models--TheBloke--TinyLlama-1.1B-GGUF/snapshots/abc123/";
    char rel[512], man[512];
    snprintf(rel, sizeof rel, "%stinyllama.Q4_K_M.gguf", hf), put(rel, "GGUF");
    snprintf(rel, sizeof rel, "%smmproj-f16.gguf", hf), put(rel, "GGUF");
    snprintf(rel, sizeof rel, "%sQ8_0/big-00001-of-00002.gguf", hf), put(rel, "GGUF");
    snprintf(rel, sizeof rel, "%sQ8_0/big-00002-of-00002.gguf", hf), put(rel, "GGUF");
    put(".cache/huggingface/hub/models--TheBloke--TinyLlama-1.1B-GGUF/snapshots/abc123/README.md", "x");
    snprintf(man, sizeof man, MANIFEST, "aaaa");
    put(".ollama/models/manifests/registry.ollama.ai/library/llama3.2/latest", man);
    put(".ollama/models/blobs/sha256-aaaa", "GGUF");
    snprintf(man, sizeof man, MANIFEST, "bbbb");
    put(".ollama/models/manifests/hf.co/bartowski/Qwen3-GGUF/Q4_K_M", man);
    put(".ollama/models/blobs/sha256-bbbb", "GGUF");
    snprintf(man, sizeof man, MANIFEST, "cccc"); /* its blob is gone */
    put(".ollama/models/manifests/registry.ollama.ai/library/gone/latest", man);
    put(".cache/llama.cpp/bartowski_Phi-4-GGUF_phi-4-Q4_K_M.gguf", "GGUF");
    put(".lmstudio/models/lmstudio-community/gemma-3-GGUF/gemma-3-4b-Q4_K_M.gguf", "GGUF");

    found_model *m = NULL;
    int n = -1;
    CHECK(model_find(&m, &n) == 0);
    for (int i = 0; i < n; i++) printf("     found: %s  %s\n", m[i].name, m[i].path);
    CHECK(n == 6);
    CHECK(ends(path_of(m, n, "TheBloke/TinyLlama-1.1B-GGUF tinyllama.Q4_K_M.gguf"), "/abc123/tinyllama.Q4_K_M.gguf"));
    CHECK(ends(path_of(m, n, "TheBloke/TinyLlama-1.1B-GGUF big-00001-of-00002.gguf"), "/Q8_0/big-00001-of-00002.gguf"));
    CHECK(ends(path_of(m, n, "ollama llama3.2:latest"), "/.ollama/models/blobs/sha256-aaaa"));
    CHECK(ends(path_of(m, n, "ollama hf.co/bartowski/Qwen3-GGUF:Q4_K_M"), "/.ollama/models/blobs/sha256-bbbb"));
    CHECK(ends(path_of(m, n, "llama.cpp bartowski_Phi-4-GGUF_phi-4-Q4_K_M.gguf"), "/.cache/llama.cpp/bartowski_Phi-4-GGUF_phi-4-Q4_K_M.gguf"));
    CHECK(ends(path_of(m, n, "lmstudio-community/gemma-3-GGUF gemma-3-4b-Q4_K_M.gguf"), "/gemma-3-4b-Q4_K_M.gguf"));
    for (int i = 1; i < n; i++) CHECK(strcmp(m[i - 1].name, m[i].name) < 0); /* sorted */
    model_find_free(m, n);
}

/* The environment variables move the stores; an empty home finds nothing. */
static void test_environment_moves_stores(void) {
    char other[300];
    snprintf(other, sizeof other, "%s/elsewhere", g_home);
    put("elsewhere/models--a--b/snapshots/r/x.gguf", "GGUF");
    setenv("HF_HUB_CACHE", other, 1);
    found_model *m = NULL;
    int n = 0;
    CHECK(model_find(&m, &n) == 0);
    CHECK(path_of(m, n, "a/b x.gguf") != NULL);
    CHECK(path_of(m, n, "TheBloke/TinyLlama-1.1B-GGUF tinyllama.Q4_K_M.gguf") == NULL);
    model_find_free(m, n);
    unsetenv("HF_HUB_CACHE");
    setenv("HOME", "/nonexistent-llmchat-home", 1);
    CHECK(model_find(&m, &n) == 0);
    CHECK(n == 0 && m == NULL);
    setenv("HOME", g_home, 1);
}

int main(void) {
    snprintf(g_home, sizeof g_home, "/tmp/llmchat-model-find-XXXXXX");
    if (!mkdtemp(g_home)) return 1;
    setenv("HOME", g_home, 1);
    const char *vars[] = {"HF_HUB_CACHE", "HF_HOME", "OLLAMA_MODELS", "LLAMA_CACHE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
    RUN(test_every_store);
    RUN(test_environment_moves_stores);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_home);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", g_home);
    return t_summary();
}
