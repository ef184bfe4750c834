/* test_clipboard.c — the OSC 52 sequence (ui/clipboard.c): base64 against the
 * RFC 4648 vectors, the framing, and the cut of a text too long to send. */
#include "tests/test.h"
#include "ui/clipboard.h"

static void test_base64_vectors(void) {
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    char out[32];
    for (int i = 0; i < 7; i++) {
        size_t n = clip_base64((const unsigned char *)in[i], strlen(in[i]), out);
        CHECKF(!strcmp(out, want[i]) && n == strlen(want[i]), "'%s' -> '%s'", in[i], out);
    }
    const unsigned char bin[] = {0xff, 0x00, 0xfe};
    clip_base64(bin, 3, out);
    CHECK(!strcmp(out, "/wD+"));
}

static void test_osc52_framing(void) {
    size_t n;
    int cut;
    char *s = clip_osc52("héllo", strlen("héllo"), &n, &cut);
    CHECK(s && !strcmp(s, "\033]52;c;aMOpbGxv\a") && n == strlen(s) && !cut);
    free(s);
}

static void test_long_text_is_cut_on_a_character(void) {
    size_t len = CLIP_MAX_BYTES + 100;
    char *t = malloc(len);
    for (size_t i = 0; i < len; i += 2) t[i] = (char)0xC3, t[i + 1] = (char)0xA9; /* é é é ... */
    size_t n;
    int cut;
    char *s = clip_osc52(t, len, &n, &cut);
    CHECK(s && cut);
    size_t b64 = n - 8; /* less "\033]52;c;" and BEL */
    size_t bytes = b64 / 4 * 3 - (s[n - 2] == '=') - (s[n - 3] == '=');
    CHECK(bytes <= CLIP_MAX_BYTES && bytes % 2 == 0); /* whole two-byte characters */
    free(s);
    free(t);
}

int main(void) {
    RUN(test_base64_vectors);
    RUN(test_osc52_framing);
    RUN(test_long_text_is_cut_on_a_character);
    return t_summary();
}
