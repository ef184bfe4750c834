/* app_files.c — files named in the chat (see app_internal.h): paths as a
 * shell reads them (~, ~user, relative to the current directory), and /file,
 * which puts a text file into the input box as a fenced block to ask about. */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ui/app_internal.h"
#include "ui/textwrap.h"

/* The home directory of user (of this user when ulen is 0); NULL when unknown. */
static const char *home_of(const char *user, size_t ulen) {
    const char *home = ulen ? NULL : getenv("HOME");
    if (home && home[0]) return home;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(ulen < sizeof name ? ulen : sizeof name - 1), user);
    struct passwd *pw = ulen ? getpwnam(name) : getpwuid(getuid());
    return pw && pw->pw_dir[0] ? pw->pw_dir : NULL;
}

int app_full_path(const char *arg, size_t len, char *out, size_t n) {
    char name[1024];
    if (len >= sizeof name) return snprintf(out, n, "the path is too long"), -1;
    snprintf(name, sizeof name, "%.*s", (int)len, arg);
    char cwd[1024];
    int w;
    if (name[0] == '~') {
        size_t ul = strcspn(name + 1, "/");
        const char *home = home_of(name + 1, ul);
        if (!home) return snprintf(out, n, "no home directory for %.*s", ul ? (int)ul : 1, ul ? name + 1 : "~"), -1;
        w = snprintf(out, n, "%s%s", home, name + 1 + ul);
    } else if (name[0] == '/') {
        w = snprintf(out, n, "%s", name);
    } else if (getcwd(cwd, sizeof cwd)) {
        w = snprintf(out, n, "%s/%s", cwd, name);
    } else {
        return snprintf(out, n, "cannot tell the current directory: %s", strerror(errno)), -1;
    }
    if (w < 0 || (size_t)w >= n) return snprintf(out, n, "the path is too long"), -1;
    return 0;
}

/* /file: a text file fits in a message up to this size. */
#define FILE_MAX_BYTES (256 * 1024)

/* The offset of the first byte that is not text (a NUL, a control character
 * other than tab, newlines and form feed, invalid UTF-8), or n. */
static size_t not_text_at(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = tw_decode(s + i, n - i, &cp);
        if ((cp == 0xFFFD && k == 1) || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r' && cp != '\f') ||
            cp == 0x7F)
            return i;
        i += k;
    }
    return n;
}

/* Reads path whole into *out (NUL-terminated); 0, or -1 with the reason in why. */
static int read_text(const char *path, char **out, size_t *len, char *why, size_t wn) {
    struct stat st;
    FILE *f = NULL;
    if (stat(path, &st) || !(f = fopen(path, "rb")))
        return snprintf(why, wn, "cannot read %s: %s", path, strerror(errno)), -1;
    char *buf = NULL;
    if (S_ISDIR(st.st_mode)) snprintf(why, wn, "%s is a directory", path);
    else if (!S_ISREG(st.st_mode)) snprintf(why, wn, "%s is not a regular file", path);
    else if (st.st_size > FILE_MAX_BYTES)
        snprintf(why, wn, "%s is %.1f MB: a message takes at most %d KB of a file", path, st.st_size / 1048576.0,
                 FILE_MAX_BYTES / 1024);
    else if (!(buf = malloc((size_t)st.st_size + 1))) snprintf(why, wn, "out of memory");
    else if ((*len = fread(buf, 1, (size_t)st.st_size, f)) != (size_t)st.st_size || ferror(f))
        snprintf(why, wn, "cannot read %s: %s", path, ferror(f) ? strerror(errno) : "it changed while read");
    else why[0] = 0;
    fclose(f);
    if (why[0]) return free(buf), -1;
    buf[*len] = 0;
    size_t bad = not_text_at(buf, *len);
    if (bad < *len) {
        snprintf(why, wn, "%s is not a text file (a binary byte at offset %zu)", path, bad);
        return free(buf), -1;
    }
    *out = buf;
    return 0;
}

void app_cmd_file(ui_app *a, const char *arg, size_t len) {
    char path[2048], why[2200];
    char *text = NULL;
    size_t n = 0;
    if (app_full_path(arg, len, path, sizeof path)) {
        app_reject(a, "/file: %s", path);
        return;
    }
    if (read_text(path, &text, &n, why, sizeof why)) {
        app_reject(a, "/file: %s", why);
        return;
    }
    const char *fence = strstr(text, "```") ? "~~~~" : "```"; /* (a fence the file itself does not close) */
    sbuf b = {0};
    sb_printf(&b, "%s%s\n", fence, app_base_name(path));
    sb_add(&b, text, n);
    sb_printf(&b, "%s%s\n", n && text[n - 1] != '\n' ? "\n" : "", fence);
    free(text);
    char *block = sb_take(&b);
    if (!block) {
        app_reject(a, "out of memory");
        return;
    }
    free(a->edit_text);
    a->edit_text = block;
    ui_app_notice(a, false, "%s (%zu bytes) is in the input: add your question and press Enter", app_base_name(path), n);
}
