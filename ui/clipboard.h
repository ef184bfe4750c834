/* clipboard.h — text to the terminal's clipboard with OSC 52 (works over ssh
 * and through tmux with `set-clipboard on`): the escape sequence, built here
 * without curses so it is tested; ui/view writes it. */
#ifndef LLC_UI_CLIPBOARD_H
#define LLC_UI_CLIPBOARD_H

#include <stddef.h>

/* Most bytes sent (terminals drop longer sequences; xterm's limit is about 100 KB
 * of base64). */
#define CLIP_MAX_BYTES (74 * 1024)

/* "ESC ] 52 ; c ; BASE64(text) BEL", malloc'd and NUL-terminated; *out_len its
 * length. Text longer than CLIP_MAX_BYTES is cut there (on a UTF-8 character
 * boundary); *cut says so. NULL when out of memory. */
char *clip_osc52(const char *text, size_t len, size_t *out_len, int *cut);

/* Standard base64 (with padding) of len bytes into out (room for 4 * ((len + 2) / 3) + 1). */
size_t clip_base64(const unsigned char *in, size_t len, char *out);

#endif
