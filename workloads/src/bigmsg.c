/*
 * bigmsg: a client and a server exchanging large messages through pipes. The client sends
 * ROUNDS messages of BYTES bytes (from a buffer it fills anew each round); the server reads each
 * whole, checks it and answers with a message of the same size, which the client reads whole.
 * usage: bigmsg BYTES ROUNDS
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void usage(void) {
    fprintf(stderr, "usage: bigmsg BYTES ROUNDS\n");
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
    if (argc != 3) usage();
    long bytes = atol(argv[1]), rounds = atol(argv[2]);
    if (bytes < 1 || bytes > (1L << 26) || rounds < 1) usage();
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) return 1;
    unsigned char *buf = malloc((size_t)bytes);
    if (!buf) return 1;
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        /* The server. */
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
