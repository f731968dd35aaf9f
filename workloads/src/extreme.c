/*
 * extreme: a benchmark of TLB-entry sharing between processes, after the one of the same name
 * in chapman03 §4.1. The parent creates FILE with PAGES pages of PAGE_SIZE bytes, maps it
 * MAP_SHARED and forks NPROC children of this executable; each child runs ITER passes that touch
 * one byte of every page (mode "read": a load; mode "exec": a call to a one-instruction function
 * at the start of the page, the file mapped executable) and then call sched_yield().
 *
 * The file is mapped once, before the forks, so every child reaches it at the same address (in
 * chapman03 each child maps it; the pages and, under key-based sharing, the addresses are the
 * same). usage: extreme FILE NPROC PAGES read|exec ITER [PAGE_SIZE]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void usage(void) {
    fprintf(stderr, "usage: extreme FILE NPROC PAGES read|exec ITER [PAGE_SIZE]\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 6 || argc > 7) usage();
    const char *path = argv[1];
    long nproc = atol(argv[2]), pages = atol(argv[3]), iter = atol(argv[5]);
    long page = argc == 7 ? atol(argv[6]) : 16384;
    int exec_mode = strcmp(argv[4], "exec") == 0;
    if (!exec_mode && strcmp(argv[4], "read") != 0) usage();
    if (nproc < 1 || pages < 1 || iter < 1 || page < 64) usage();

    size_t len = (size_t)pages * (size_t)page;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
        perror(path);
        return 1;
    }
    /* Each page starts with "xor eax, eax; ret" (x86-64): callable in exec mode. */
    unsigned char code[3] = {0x31, 0xc0, 0xc3};
    for (long p = 0; p < pages; p++) {
        if (pwrite(fd, code, sizeof code, (off_t)(p * page)) != (ssize_t)sizeof code) {
            perror("pwrite");
            return 1;
        }
    }
    int prot = PROT_READ | (exec_mode ? PROT_EXEC : 0);
    volatile unsigned char *m = mmap(NULL, len, prot, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    close(fd);

    for (long c = 0; c < nproc; c++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            unsigned sum = 0;
            for (long i = 0; i < iter; i++) {
                for (long p = 0; p < pages; p++) {
                    if (exec_mode) {
                        int (*f)(void) = (int (*)(void))(void *)(m + p * page);
                        sum += (unsigned)f();
                    } else {
                        sum += m[p * page + 64];
                    }
                }
                sched_yield();
            }
            _exit(sum == 12345 ? 3 : 0);
        }
    }
    int status, failed = 0;
    while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    unlink(path);
    return failed;
}
