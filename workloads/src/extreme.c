/*
 * extreme: a benchmark of TLB-entry sharing between processes, after the one of the same name
 * in chapman03 §4.1. The parent creates FILE with PAGES pages of PAGE_SIZE bytes and forks NPROC
 * children of this executable; each child runs ITER passes that touch every page of the file,
 * mapped MAP_SHARED (mode "read": a load of one byte; mode "exec": a call to a one-instruction
 * function at the start of the page, the file mapped executable; mode "both": the call and then
 * the load), each pass ending with sched_yield().
 *
 * By default the file is mapped once, before the forks, so every child reaches it at the same
 * address through the mapping it inherits. With -c each child maps the file itself after the
 * fork, as in chapman03 (the same pages, at whatever address each child's mmap returns).
 * usage: extreme [-c] FILE NPROC PAGES read|exec|both ITER [PAGE_SIZE]
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

/* A function returning 0, written at the start of every page (callable in exec mode). */
#if defined(__x86_64__) || defined(__i386__)
static const unsigned char code[] = {0x31, 0xc0, 0xc3}; /* xor eax, eax; ret */
#elif defined(__aarch64__)
static const unsigned char code[] = {0x00, 0x00, 0x80, 0x52, 0xc0, 0x03, 0x5f, 0xd6}; /* mov w0, 0; ret */
#elif defined(__riscv)
static const unsigned char code[] = {0x13, 0x05, 0x00, 0x00, 0x67, 0x80, 0x00, 0x00}; /* li a0, 0; ret */
#else
static const unsigned char code[] = {0};
#define NO_EXEC_CODE 1
#endif

enum { READ = 1, EXEC = 2 };

static void usage(void) {
    fprintf(stderr, "usage: extreme [-c] FILE NPROC PAGES read|exec|both ITER [PAGE_SIZE]\n");
    exit(2);
}

static volatile unsigned char *map_file(const char *path, size_t len, int mode) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        perror(path);
        return NULL;
    }
    int prot = PROT_READ | (mode & EXEC ? PROT_EXEC : 0);
    void *m = mmap(NULL, len, prot, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        perror("mmap");
        return NULL;
    }
    return m;
}

/* A child's passes over the mapping. */
static unsigned run(volatile unsigned char *m, long pages, long page, int mode, long iter) {
    unsigned sum = 0;
    for (long i = 0; i < iter; i++) {
        for (long p = 0; p < pages; p++) {
            if (mode & EXEC) {
                int (*f)(void) = (int (*)(void))(void *)(m + p * page);
                sum += (unsigned)f();
            }
            if (mode & READ) sum += m[p * page + 64];
        }
        sched_yield();
    }
    return sum;
}

int main(int argc, char **argv) {
    int per_child = argc > 1 && strcmp(argv[1], "-c") == 0;
    argv += per_child;
    argc -= per_child;
    if (argc < 6 || argc > 7) usage();
    const char *path = argv[1];
    long nproc = atol(argv[2]), pages = atol(argv[3]), iter = atol(argv[5]);
    long page = argc == 7 ? atol(argv[6]) : 16384;
    int mode = strcmp(argv[4], "read") == 0   ? READ
               : strcmp(argv[4], "exec") == 0 ? EXEC
               : strcmp(argv[4], "both") == 0 ? READ | EXEC
                                              : 0;
    if (!mode || nproc < 1 || pages < 1 || iter < 1 || page < 128) usage();
#ifdef NO_EXEC_CODE
    if (mode & EXEC) {
        fprintf(stderr, "extreme: exec mode is not supported on this architecture\n");
        return 2;
    }
#endif

    size_t len = (size_t)pages * (size_t)page;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
        perror(path);
        return 1;
    }
    for (long p = 0; p < pages; p++) {
        if (pwrite(fd, code, sizeof code, (off_t)(p * page)) != (ssize_t)sizeof code) {
            perror("pwrite");
            return 1;
        }
    }
    close(fd);
    volatile unsigned char *m = NULL;
    if (!per_child && !(m = map_file(path, len, mode))) return 1;

    for (long c = 0; c < nproc; c++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            if (per_child && !(m = map_file(path, len, mode))) _exit(1);
            _exit(run(m, pages, page, mode, iter) == 12345 ? 3 : 0);
        }
    }
    int status, failed = 0;
    while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    unlink(path);
    return failed;
}
