/*
 * bigmsg: a client and a server exchanging large messages through pipes (or TRANSPORT `unix`: a
 * Unix stream socket pair; `tcp`: a TCP connection over loopback, 127.0.0.1 only). The client
 * sends ROUNDS messages of BYTES bytes (from a buffer it fills anew each round); the server reads
 * each whole, checks it and answers with a message of the same size, which the client reads whole.
 * usage: bigmsg BYTES ROUNDS [pipe|unix|tcp]
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void usage(void) {
    fprintf(stderr, "usage: bigmsg BYTES ROUNDS [pipe|unix|tcp]\n");
    exit(2);
}

static int full_read(int fd, unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int full_write(int fd, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t r = write(fd, p, n);
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) usage();
    long bytes = atol(argv[1]), rounds = atol(argv[2]);
    const char *transport = argc == 4 ? argv[3] : "pipe";
    if (bytes < 1 || bytes > (1L << 26) || rounds < 1) usage();
    /* The server reads up[0] and writes down[1]; the client writes up[1] and reads down[0]. */
    int up[2], down[2], listener = -1;
    if (strcmp(transport, "pipe") == 0) {
        if (pipe(up) != 0 || pipe(down) != 0) return 1;
    } else if (strcmp(transport, "unix") == 0) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
        up[0] = down[1] = sv[0];
        up[1] = down[0] = sv[1];
    } else if (strcmp(transport, "tcp") == 0) {
        /* A listening socket on 127.0.0.1 at a port the kernel picks; the server accepts. */
        struct sockaddr_in a;
        socklen_t len = sizeof a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        listener = socket(AF_INET, SOCK_STREAM, 0);
        if (listener < 0 || bind(listener, (struct sockaddr *)&a, sizeof a) != 0 || listen(listener, 1) != 0 ||
            getsockname(listener, (struct sockaddr *)&a, &len) != 0) {
            perror("tcp");
            return 1;
        }
        int c = socket(AF_INET, SOCK_STREAM, 0);
        if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) != 0) {
            perror("connect");
            return 1;
        }
        up[1] = down[0] = c;
        up[0] = down[1] = -1;
    } else {
        usage();
    }
    unsigned char *buf = malloc((size_t)bytes);
    if (!buf) return 1;
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        /* The server. */
        if (listener >= 0) {
            int s = accept(listener, NULL, NULL);
            if (s < 0) _exit(1);
            up[0] = down[1] = s;
        }
        for (long r = 0; r < rounds; r++) {
            if (full_read(up[0], buf, (size_t)bytes) != 0) _exit(1);
            uint32_t s = 0;
            for (long i = 0; i < bytes; i++) s = s * 31 + buf[i];
            buf[0] = (unsigned char)s;
            if (full_write(down[1], buf, (size_t)bytes) != 0) _exit(1);
        }
        _exit(0);
    }
    uint64_t total = 0;
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < bytes; i++) buf[i] = (unsigned char)(i + r);
        if (full_write(up[1], buf, (size_t)bytes) != 0) return 1;
        if (full_read(down[0], buf, (size_t)bytes) != 0) return 1;
        total += buf[0];
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    printf("%llu\n", (unsigned long long)total);
    return 0;
}
