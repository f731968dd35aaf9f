/*
 * shmserve: a server and CLIENTS client processes (forked) sharing a reply area. The server
 * keeps a table of 64 KB, read-only except while it updates it: every 16 requests it makes the
 * table writable (mprotect), rewrites an entry, and makes it read-only again. It answers each
 * request (a client number and a seed, through a pipe) by writing KB kilobytes computed from
 * the table into that client's slot of a MAP_SHARED area, and after every 8 replies gives its
 * scratch arena back with madvise(MADV_DONTNEED). Each client sends REQUESTS requests, waits for
 * each reply on its own pipe, and reads its slot. Prints the clients' checksum.
 * usage: shmserve CLIENTS REQUESTS KB
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define TABLE (64 * 1024)

static void usage(void) {
    fprintf(stderr, "usage: shmserve CLIENTS REQUESTS KB\n");
    exit(2);
}

static void full_write(int fd, const void *p, size_t n) {
    if (write(fd, p, n) != (ssize_t)n) _exit(1);
}

static void full_read(int fd, void *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r <= 0) _exit(1);
        got += (size_t)r;
    }
}

int main(int argc, char **argv) {
    if (argc != 4) usage();
    long clients = atol(argv[1]), requests = atol(argv[2]), kb = atol(argv[3]);
    if (clients < 1 || clients > 64 || requests < 1 || kb < 1 || kb > 65536) usage();
    size_t slot = (size_t)kb * 1024;
    char *area = mmap(NULL, slot * (size_t)clients, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) return 1;
    int req[2], rep[64][2];
    if (pipe(req) != 0) return 1;
    for (long c = 0; c < clients; c++)
        if (pipe(rep[c]) != 0) return 1;
    for (long c = 0; c < clients; c++) {
        pid_t pid = fork();
        if (pid < 0) return 1;
        if (pid == 0) {
            uint64_t sum = 0, seed = 0x9e3779b97f4a7c15ull * (uint64_t)(c + 1);
            for (long r = 0; r < requests; r++) {
                seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
                uint64_t msg[2] = {(uint64_t)c, seed};
                full_write(req[1], msg, sizeof msg);
                char ok;
                full_read(rep[c][0], &ok, 1);
                const uint64_t *s = (const uint64_t *)(area + slot * (size_t)c);
                for (size_t i = 0; i < slot / 8; i += 8) sum += s[i];
            }
            printf("client %ld: %llu\n", c, (unsigned long long)sum);
            fflush(stdout);
            _exit(0);
        }
    }
    uint64_t *table = mmap(NULL, TABLE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *scratch = mmap(NULL, slot, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (table == MAP_FAILED || scratch == MAP_FAILED) return 1;
    for (size_t i = 0; i < TABLE / 8; i++) table[i] = i * 0x9e3779b97f4a7c15ull;
    if (mprotect(table, TABLE, PROT_READ) != 0) return 1;
    for (long n = 0; n < clients * requests; n++) {
        uint64_t msg[2];
        full_read(req[0], msg, sizeof msg);
        long c = (long)msg[0];
        if (c < 0 || c >= clients) return 1;
        uint64_t *scr = (uint64_t *)scratch, *out = (uint64_t *)(area + slot * (size_t)c);
        for (size_t i = 0; i < slot / 8; i += 8) scr[i] = table[(msg[1] + i) % (TABLE / 8)] ^ msg[1];
        for (size_t i = 0; i < slot / 8; i += 8) out[i] = scr[i];
        full_write(rep[c][1], "k", 1);
        if (n % 8 == 7 && madvise(scratch, slot, MADV_DONTNEED) != 0) return 1;
        if (n % 16 == 15) {
            if (mprotect(table, TABLE, PROT_READ | PROT_WRITE) != 0) return 1;
            table[msg[1] % (TABLE / 8)] ^= (uint64_t)n;
            if (mprotect(table, TABLE, PROT_READ) != 0) return 1;
        }
    }
    for (long c = 0; c < clients; c++) wait(NULL);
    return 0;
}
