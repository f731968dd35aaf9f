/*
 * vmloop: the virtual-memory loops of chapman03 §4.2-4.3, after lmbench's lat_mmap and
 * lat_pagefault and aim's fork_test.
 *
 * mode "mmap": ITER times, map FILE (PAGES pages of PAGE_SIZE bytes, MAP_SHARED), read one byte
 *   of each page in order, unmap it ("The benchmark maps a number of pages, accesses them
 *   sequentially, unmaps, and repeats", chapman03 §4.2 on lmbench's mmap latency);
 * mode "fault": the same, but the pages are read in a scattered order (page i * STRIDE mod
 *   PAGES, STRIDE odd and coprime to PAGES), each read a page fault as in lmbench's
 *   lat_pagefault, which times the first touch of each page of a freshly mapped file;
 * mode "fork": ITER times, fork a child that exits at once and wait for it (aim's fork_test,
 *   which chapman03 §4.3 ran on its own); FILE and PAGES are unused, PAGES of a private buffer
 *   are written first so that each child inherits a small address space.
 *
 * The file is created (and removed at the end) by the program itself.
 * usage: vmloop mmap|fault|fork FILE PAGES ITER [PAGE_SIZE]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void usage(void) {
    fprintf(stderr, "usage: vmloop mmap|fault|fork FILE PAGES ITER [PAGE_SIZE]\n");
    exit(2);
}

static long gcd(long a, long b) {
    while (b) {
        long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int main(int argc, char **argv) {
    if (argc < 5 || argc > 6) usage();
    const char *mode = argv[1], *path = argv[2];
    long pages = atol(argv[3]), iter = atol(argv[4]);
    long page = argc == 6 ? atol(argv[5]) : 16384;
    int fork_mode = strcmp(mode, "fork") == 0, scattered = strcmp(mode, "fault") == 0;
    if ((!fork_mode && !scattered && strcmp(mode, "mmap") != 0) || pages < 1 || iter < 1 || page < 128) usage();
    size_t len = (size_t)pages * (size_t)page;
    unsigned sum = 0;

    if (fork_mode) {
        volatile unsigned char *buf = malloc(len);
        if (!buf) return 1;
        for (long p = 0; p < pages; p++) buf[p * page] = (unsigned char)p;
        for (long i = 0; i < iter; i++) {
            pid_t pid = fork();
            if (pid < 0) {
                perror("fork");
                return 1;
            }
            if (pid == 0) _exit(0);
            int status;
            if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
        }
        printf("vmloop fork: %ld forks\n", iter);
        return 0;
    }

    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
        perror(path);
        return 1;
    }
    for (long p = 0; p < pages; p++) {
        unsigned char b = (unsigned char)(p + 1);
        if (pwrite(fd, &b, 1, (off_t)(p * page)) != 1) {
            perror("pwrite");
            return 1;
        }
    }
    /* The scattering stride: the first odd number from PAGES / 3 up that is coprime to PAGES. */
    long stride = 1;
    if (scattered && pages > 2) {
        stride = pages / 3 | 1;
        while (gcd(stride, pages) != 1) stride += 2;
    }
    unsigned expect = 0;
    for (long p = 0; p < pages; p++) expect += (unsigned char)(p + 1);
    for (long i = 0; i < iter; i++) {
        volatile unsigned char *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        unsigned s = 0;
        for (long k = 0; k < pages; k++) s += m[(k * stride % pages) * page];
        munmap((void *)m, len);
        if (s != expect) {
            fprintf(stderr, "vmloop: read %u, wrote %u\n", s, expect);
            return 1;
        }
        sum += s;
    }
    close(fd);
    unlink(path);
    printf("vmloop %s: %ld maps of %ld pages, sum %u\n", mode, iter, pages, sum);
    return 0;
}
