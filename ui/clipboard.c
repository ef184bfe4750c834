/* clipboard.c — the OSC 52 sequence (see clipboard.h). */
#include "ui/clipboard.h"

#include <stdlib.h>
#include <string.h>

size_t clip_base64(const unsigned char *in, size_t len, char *out) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0, i = 0;
    for (; i + 3 <= len; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
        out[o++] = tab[v >> 18], out[o++] = tab[(v >> 12) & 63], out[o++] = tab[(v >> 6) & 63],
        out[o++] = tab[v & 63];
    }
    if (len - i == 1) {
        unsigned v = (unsigned)in[i] << 16;
        out[o++] = tab[v >> 18], out[o++] = tab[(v >> 12) & 63], out[o++] = '=', out[o++] = '=';
    } else if (len - i == 2) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;
        out[o++] = tab[v >> 18], out[o++] = tab[(v >> 12) & 63], out[o++] = tab[(v >> 6) & 63], out[o++] = '=';
    }
    out[o] = 0;
    return o;
}

char *clip_osc52(const char *text, size_t len, size_t *out_len, int *cut) {
    *cut = 0;
    if (len > CLIP_MAX_BYTES) {
        len = CLIP_MAX_BYTES;
        while (len > 0 && ((unsigned char)text[len] & 0xC0) == 0x80) len--; /* whole characters */
        *cut = 1;
    }
    static const char head[] = "\033]52;c;";
    size_t hl = sizeof head - 1;
    char *out = malloc(hl + 4 * ((len + 2) / 3) + 2);
    if (!out) return NULL;
    memcpy(out, head, hl);
    size_t n = hl + clip_base64((const unsigned char *)text, len, out + hl);
    out[n++] = '\a';
    out[n] = 0;
    *out_len = n;
    return out;
}
