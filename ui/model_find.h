/* model_find.h — the GGUF files already on this machine, found where the
 * usual tools keep them, each with a name a person recognises:
 *   Hugging Face hub cache  $HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub:
 *                           models--ORG--NAME/snapshots/REV/[DIR/]FILE.gguf
 *                           -> "ORG/NAME FILE.gguf"
 *   Ollama                  $OLLAMA_MODELS or ~/.ollama/models: a manifest
 *                           manifests/HOST/NS/NAME/TAG whose model layer's digest
 *                           names blobs/sha256-HEX -> "ollama NAME:TAG"
 *                           (HOST/NS/ kept when not registry.ollama.ai/library)
 *   llama.cpp's cache       $LLAMA_CACHE or ~/.cache/llama.cpp: FILE.gguf -> "llama.cpp FILE.gguf"
 *   LM Studio               ~/.lmstudio/models and ~/.cache/lm-studio/models:
 *                           PUBLISHER/REPO/FILE.gguf -> "PUBLISHER/REPO FILE.gguf"
 * Multimodal projectors (mmproj*) and the second and later parts of a split
 * file (-0000N-of-) are left out. Nothing is opened but directories and
 * Ollama's small manifests. Thread: any (reads the environment). */
#ifndef LLC_UI_MODEL_FIND_H
#define LLC_UI_MODEL_FIND_H

typedef struct found_model {
    char *name; /* readable: where it came from and what it is */
    char *path; /* the GGUF file */
} found_model;

/* Every model found, sorted by name (none: *out NULL, *n 0). Returns 0, or
 * LLC_ERR_NOMEM (what was found so far is still given). */
int model_find(found_model **out, int *n);
void model_find_free(found_model *m, int n);

#endif
