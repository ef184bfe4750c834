/* conn_hold.c — opens many connections to a server and holds them, as a leaky
 * editor plugin or a port scanner would: each sends TEXT (e.g. half a request
 * line, or nothing) and then waits. Prints "open N" once all are connected,
 * holds them for --hold-ms, then prints "dropped K": how many the server had
 * closed by then (end of file or reset), and exits.
 *
 *   conn_hold (--tcp HOST:PORT | --unix PATH) [-n N] [--send TEXT [--line]] [--hold-ms MS]
 *
 * --line ends TEXT with a newline (a complete NDJSON request).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int open_one(const char *tcp, const char *path) {
    int fd;
    if (tcp) {
        char host[64];
        const char *colon = strrchr(tcp, ':');
        if (!colon || (size_t)(colon - tcp) >= sizeof host) return -1;
        memcpy(host, tcp, (size_t)(colon - tcp));
        host[colon - tcp] = 0;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
        if (inet_pton(AF_INET, host, &a.sin_addr) != 1) return -1;
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a)) {
            close(fd);
            return -1;
        }
    } else {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof a.sun_path) return -1;
        strcpy(a.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a)) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

/* The server closed it: end of file or an error on a read that does not wait. */
static int closed_by_server(int fd) {
    char b[256];
    for (;;) {
        ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
        if (r > 0) continue; /* an answer (e.g. 408): read on */
        if (r == 0) return 1;
        return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    }
}

int main(int argc, char **argv) {
    const char *tcp = NULL, *path = NULL, *text = "";
    int n = 300, hold = 1000;
    int line = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tcp") && i + 1 < argc) tcp = argv[++i];
        else if (!strcmp(argv[i], "--unix") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--send") && i + 1 < argc) text = argv[++i];
        else if (!strcmp(argv[i], "--hold-ms") && i + 1 < argc) hold = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--line")) line = 1;
        else {
            fprintf(stderr, "usage: conn_hold (--tcp HOST:PORT | --unix PATH) [-n N] [--send TEXT [--line]] [--hold-ms MS]\n");
            return 2;
        }
    }
    if ((!tcp) == (!path) || n < 1 || n > 100000) {
        fprintf(stderr, "conn_hold: give --tcp or --unix, and 1 <= n <= 100000\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int *fds = calloc((size_t)n, sizeof *fds);
    if (!fds) return 1;
    int opened = 0;
    for (int i = 0; i < n; i++) {
        fds[i] = open_one(tcp, path);
        if (fds[i] < 0) {
            fprintf(stderr, "conn_hold: connection %d: %s\n", i, strerror(errno));
            continue;
        }
        opened++;
        size_t len = strlen(text);
        if (len && send(fds[i], text, len, MSG_NOSIGNAL) < 0) continue; /* already refused */
        if (line && send(fds[i], "\n", 1, MSG_NOSIGNAL) < 0) continue;
    }
    printf("open %d\n", opened);
    fflush(stdout);
    double end = now_ms() + hold;
    while (now_ms() < end) usleep(20000);
    int dropped = 0;
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) {
            dropped += closed_by_server(fds[i]);
            close(fds[i]);
        }
    printf("dropped %d\n", dropped);
    free(fds);
    return 0;
}
