/* model_find.c — finding the GGUF files other tools downloaded (model_find.h):
 * one small walker per store, each adding (name, path) pairs to a list that
 * is sorted at the end. Directories are read with a depth limit; symlinks are
 * followed as files (Hugging Face snapshots link into its blob store). */
#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "kernels/common.h"
#include "ui/model_find.h"

#define MANIFEST_MAX (1 << 20) /* an Ollama manifest is a few hundred bytes */

typedef struct found_list {
    found_model *v;
    int n, cap;
    bool oom;
} found_list;

static void add(found_list *l, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(found_list *l, const char *path, const char *fmt, ...) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].path, path)) return; /* (two stores may share a folder) */
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        found_model *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    char *name = NULL;
    va_list ap;
    va_start(ap, fmt);
    int w = vasprintf(&name, fmt, ap);
    va_end(ap);
    char *p = w >= 0 ? strdup(path) : NULL;
    if (!p) {
        if (w >= 0) free(name);
        l->oom = true;
        return;
    }
    l->v[l->n++] = (found_model){name, p};
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* A GGUF file worth listing: not a projector, not a later part of a split file. */
static bool wanted_gguf(const char *file) {
    if (!ends_with(file, ".gguf") || !strncmp(file, "mmproj", 6)) return false;
    const char *of = strstr(file, "-of-");
    return !(of && of - file >= 6 && !strncmp(of - 6, "-0000", 5) && of[-1] != '1');
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Calls fn for each entry of dir but "." and ".." (hidden ones too). */
static void each_entry(const char *dir, void (*fn)(void *ctx, const char *dir, const char *name), void *ctx) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) fn(ctx, dir, e->d_name);
    closedir(d);
}

static char *join(const char *a, const char *b) {
    char *p = NULL;
    return asprintf(&p, "%s/%s", a, b) < 0 ? NULL : p;
}

/* $VAR, else $HOME/rel ("" when neither is set). */
static void base_dir(char *out, size_t cap, const char *var, const char *rel) {
    const char *v = var ? getenv(var) : NULL, *home = getenv("HOME");
    if (v && *v) snprintf(out, cap, "%s", v);
    else if (home && *home && rel) snprintf(out, cap, "%s/%s", home, rel);
    else out[0] = 0;
}

/* ---- GGUF files under a folder, named by a prefix and their path below it ---- */

typedef struct walk {
    found_list *l;
    const char *label; /* the name's first word ("llama.cpp", "ORG/NAME", ...) */
    int depth;         /* folders still to descend */
} walk;

static void walk_entry(void *ctx, const char *dir, const char *name) {
    walk *w = ctx;
    char *p = join(dir, name);
    if (!p) {
        w->l->oom = true;
        return;
    }
    if (wanted_gguf(name) && is_file(p)) add(w->l, p, "%s %s", w->label, name);
    else if (w->depth > 0 && name[0] != '.' && is_dir(p)) {
        walk sub = {w->l, w->label, w->depth - 1};
        each_entry(p, walk_entry, &sub);
    }
    free(p);
}

static void walk_files(found_list *l, const char *dir, const char *label, int depth) {
    walk w = {l, label, depth};
    each_entry(dir, walk_entry, &w);
}

/* ---- Hugging Face: models--ORG--NAME/snapshots/REV/... ---- */

static void hf_repo(void *ctx, const char *hub, const char *name) {
    found_list *l = ctx;
    if (strncmp(name, "models--", 8)) return;
    char label[512]; /* "models--ORG--NAME" -> "ORG/NAME" (one more "--" is part of NAME) */
    snprintf(label, sizeof label, "%s", name + 8);
    char *sep = strstr(label, "--");
    if (sep) memmove(sep + 1, sep + 2, strlen(sep + 2) + 1), *sep = '/';
    char *snaps = NULL;
    if (asprintf(&snaps, "%s/%s/snapshots", hub, name) < 0) return;
    walk_files(l, snaps, label, 2); /* REV/, then one folder inside the repo */
    free(snaps);
}

/* ---- Ollama: manifests/HOST/NS/NAME/TAG -> blobs/sha256-HEX ---- */

typedef struct ollama_walk {
    found_list *l;
    const char *root;   /* the models folder */
    char parts[4][128]; /* HOST, NS, NAME as the walk goes down */
    int level;
} ollama_walk;

static char *read_small(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(MANIFEST_MAX + 1);
    size_t n = buf ? fread(buf, 1, MANIFEST_MAX, f) : 0;
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

/* The blob of a manifest's model layer ("" when it has none). */
static void manifest_model_blob(const char *manifest, char *out, size_t cap) {
    out[0] = 0;
    char *text = read_small(manifest);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *layer;
    cJSON_ArrayForEach(layer, cJSON_GetObjectItemCaseSensitive(j, "layers")) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(layer, "mediaType");
        const cJSON *digest = cJSON_GetObjectItemCaseSensitive(layer, "digest");
        if (cJSON_IsString(type) && !strcmp(type->valuestring, "application/vnd.ollama.image.model") &&
            cJSON_IsString(digest) && !strncmp(digest->valuestring, "sha256:", 7)) {
            snprintf(out, cap, "sha256-%s", digest->valuestring + 7);
            break;
        }
    }
    cJSON_Delete(j);
}

static void ollama_entry(void *ctx, const char *dir, const char *name) {
    ollama_walk *w = ctx;
    char *p = join(dir, name);
    if (!p) {
        w->l->oom = true;
        return;
    }
    if (w->level < 3 && is_dir(p)) { /* HOST, NS, NAME */
        ollama_walk sub = *w;
        snprintf(sub.parts[w->level], sizeof sub.parts[0], "%s", name);
        sub.level++;
        each_entry(p, ollama_entry, &sub);
    } else if (w->level == 3 && is_file(p)) { /* TAG: a manifest */
        char blob_name[160], *blob = NULL;
        manifest_model_blob(p, blob_name, sizeof blob_name);
        if (blob_name[0] && asprintf(&blob, "%s/blobs/%s", w->root, blob_name) >= 0 && is_file(blob)) {
            bool library = !strcmp(w->parts[0], "registry.ollama.ai") && !strcmp(w->parts[1], "library");
            if (library) add(w->l, blob, "ollama %s:%s", w->parts[2], name);
            else add(w->l, blob, "ollama %s/%s/%s:%s", w->parts[0], w->parts[1], w->parts[2], name);
        }
        free(blob);
    }
    free(p);
}

/* ---- the list ---- */

static int by_name(const void *a, const void *b) {
    return strcmp(((const found_model *)a)->name, ((const found_model *)b)->name);
}

int model_find(found_model **out, int *n) {
    found_list l = {0};
    char dir[4096], sub[4400];
    /* Hugging Face */
    base_dir(dir, sizeof dir, "HF_HUB_CACHE", NULL);
    if (!dir[0]) {
        char hf_home[4000];
        base_dir(hf_home, sizeof hf_home, "HF_HOME", ".cache/huggingface");
        if (hf_home[0]) snprintf(dir, sizeof dir, "%s/hub", hf_home);
    }
    if (dir[0]) each_entry(dir, hf_repo, &l);
    /* Ollama */
    base_dir(dir, sizeof dir, "OLLAMA_MODELS", ".ollama/models");
    if (dir[0]) {
        ollama_walk w = {.l = &l, .root = dir};
        snprintf(sub, sizeof sub, "%s/manifests", dir);
        each_entry(sub, ollama_entry, &w);
    }
    /* llama.cpp's cache (-hf downloads) */
    base_dir(dir, sizeof dir, "LLAMA_CACHE", ".cache/llama.cpp");
    if (dir[0]) walk_files(&l, dir, "llama.cpp", 0);
    /* LM Studio: PUBLISHER/REPO/FILE.gguf, named "PUBLISHER/REPO FILE" */
    static const char *const lms[] = {".lmstudio/models", ".cache/lm-studio/models"};
    for (size_t i = 0; i < sizeof lms / sizeof *lms; i++) {
        base_dir(dir, sizeof dir, NULL, lms[i]);
        DIR *pubs = dir[0] ? opendir(dir) : NULL;
        struct dirent *pe;
        while (pubs && (pe = readdir(pubs))) {
            if (pe->d_name[0] == '.') continue;
            snprintf(sub, sizeof sub, "%s/%s", dir, pe->d_name);
            DIR *repos = opendir(sub);
            struct dirent *re;
            while (repos && (re = readdir(repos))) {
                if (re->d_name[0] == '.') continue;
                char label[600], *repo = NULL;
                snprintf(label, sizeof label, "%s/%s", pe->d_name, re->d_name);
                if (asprintf(&repo, "%s/%s", sub, re->d_name) < 0) continue;
                walk_files(&l, repo, label, 0);
                free(repo);
            }
            if (repos) closedir(repos);
        }
        if (pubs) closedir(pubs);
    }
    if (l.n > 1) qsort(l.v, (size_t)l.n, sizeof *l.v, by_name);
    *out = l.v;
    *n = l.n;
    return l.oom ? LLC_ERR_NOMEM : 0;
}

void model_find_free(found_model *m, int n) {
    for (int i = 0; i < n; i++) {
        free(m[i].name);
        free(m[i].path);
    }
    free(m);
}
