/*
 * ctx-ring: context switching among NPROC processes in a ring, after lmbench's lat_ctx. Each
 * process owns a private working set of KB kilobytes; a token goes round the ring through pipes
 * ROUNDS times, and each process, on receiving it, reads and writes its whole working set (one
 * word per 64-byte line) before passing it on. Every pass blocks in read() until the token comes.
 * usage: ctx-ring NPROC KB ROUNDS
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void usage(void) {
    fprintf(stderr, "usage: ctx-ring NPROC KB ROUNDS\n");
    exit(2);
}

static void pass(int in, int out, long rounds, long kb, int first) {
    size_t words = (size_t)kb * 1024 / sizeof(long);
    long *ws = words ? calloc(words, sizeof(long)) : NULL;
    if (words && !ws) _exit(1);
    long token = 0;
    for (long r = 0; r < rounds; r++) {
        if (!(first && r == 0) && read(in, &token, sizeof token) != (ssize_t)sizeof token) _exit(1);
        for (size_t i = 0; i < words; i += 64 / sizeof(long)) ws[i] += token;
        token++;
        if (write(out, &token, sizeof token) != (ssize_t)sizeof token) _exit(1);
    }
    free(ws);
}

int main(int argc, char **argv) {
    if (argc != 4) usage();
    long nproc = atol(argv[1]), kb = atol(argv[2]), rounds = atol(argv[3]);
    if (nproc < 2 || nproc > 1024 || kb < 0 || rounds < 1) usage();
    int (*p)[2] = calloc((size_t)nproc, sizeof *p);
    if (!p) return 1;
    for (long i = 0; i < nproc; i++) {
        if (pipe(p[i]) != 0) {
            perror("pipe");
            return 1;
        }
    }
    /* Process i reads pipe i and writes pipe (i + 1) mod nproc; process 0 is the parent. */
    for (long i = 1; i < nproc; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            pass(p[i][0], p[(i + 1) % nproc][1], rounds, kb, 0);
            _exit(0);
        }
    }
    pass(p[0][0], p[1 % nproc][1], rounds, kb, 1);
    /* The last token comes back to the parent. */
    long token;
    if (read(p[0][0], &token, sizeof token) != (ssize_t)sizeof token) return 1;
    int status, failed = 0;
    while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    return failed;
}
