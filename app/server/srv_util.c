/* srv_util.c — small helpers of the socket server: JSON string escaping (into an
 * sbuf) that never emits invalid UTF-8, the clock, and a constant-time comparison
 * for API keys. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/server/srv_internal.h"

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
    else return 0;
    if (n < len) return 0;
    unsigned cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

bool srv_json_has_nul(const char *s, size_t n) {
    if (memchr(s, 0, n)) return true;
    for (size_t i = 0; i + 6 <= n; i++) {
        if (s[i] != '\\' || s[i + 1] != 'u' || memcmp(s + i + 2, "0000", 4)) continue;
        size_t k = 0; /* backslashes ending at i: an odd count makes this one an escape */
        while (k <= i && s[i - k] == '\\') k++;
        if (k % 2 == 1) return true;
    }
    return false;
}

bool srv_utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = utf8_len(s + i, n - i);
        if (!l) return false;
        i += l;
    }
    return true;
}

void sb_json_str(sbuf *b, const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    sb_add(b, "\"", 1);
    if (b->oom) return;
    size_t run = 0; /* bytes copied as they are, written in one go */
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        const char *esc = NULL;
        char ubuf[8];
        size_t l = 1;
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c < 0x20 || c == 0x7F) {
            snprintf(ubuf, sizeof ubuf, "\\u%04x", c);
            esc = ubuf;
        } else if (c >= 0x80 && (l = utf8_len(s + i, n - i)) == 0) {
            esc = "\xEF\xBF\xBD"; /* U+FFFD for a byte that starts no valid character */
            l = 1;
        }
        if (esc) {
            sb_add(b, s + i - run, run);
            run = 0;
            sb_str(b, esc);
        } else {
            run += l;
        }
        i += l;
    }
    sb_add(b, s + n - run, run);
    sb_add(b, "\"", 1);
}

void sb_json_num(sbuf *b, double v) {
    if (!isfinite(v)) sb_str(b, "null");
    else if (v == (double)(long long)v && fabs(v) < 1e15) sb_printf(b, "%lld", (long long)v);
    else sb_printf(b, "%.6g", v);
}

bool srv_secret_eq(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la != lb;
    for (size_t i = 0; i < la; i++) d |= (unsigned char)(a[i] ^ b[i < lb ? i : 0]);
    return d == 0;
}

void srv_display_name(const char *path, char *out, size_t n) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len > 5 && !strcmp(base + len - 5, ".gguf")) len -= 5;
    snprintf(out, n, "%.*s", (int)len, base);
}
