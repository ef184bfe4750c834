/* fake_openai.c — the fake OpenAI-compatible server of tests/fake_openai.h as a
 * program, for the tmux tests of `llmchat --remote`:
 *     fake_openai PORTFILE [KEY]
 * listens on 127.0.0.1 at a free port, writes the port to PORTFILE and serves
 * until it is killed. */
#include "tests/fake_openai.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: fake_openai PORTFILE [KEY]\n");
        return 2;
    }
    static fake_openai f;
    if (fake_openai_start(&f, argc > 2 ? argv[2] : NULL)) {
        perror("fake_openai");
        return 1;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *o = fopen(tmp, "w");
    if (!o || fprintf(o, "%d\n", f.port) < 0 || fclose(o) || rename(tmp, argv[1])) {
        perror(argv[1]);
        return 1;
    }
    pthread_join(f.thread, NULL);
    return 0;
}
