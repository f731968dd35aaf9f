/* The benchmark's hand-written anchor: a fully associative LRU TLB of N entries (default 64)
 * over a stream of page numbers (little-endian u64s, as written by the `pages` example), kept
 * as a chained hash table of entries plus a doubly linked LRU list. Reads the whole stream into
 * memory first and times only the simulation loop.
 * Build: cc -O2 -o fa_lru benches/fa_lru.c    Run: ./fa_lru PAGES.u64 [ENTRIES]
 * Prints: lookups misses seconds */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct entry {
    uint64_t page;
    int32_t prev, next;   /* LRU list, -1 = none */
    int32_t chain;        /* next entry in the same hash bucket, -1 = none */
};

static uint32_t bucket_of(uint64_t page, uint32_t mask) {
    uint64_t x = page * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(x >> 40) & mask;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PAGES.u64 [ENTRIES]\n", argv[0]);
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 64;
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 2; }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    size_t len = (size_t)bytes / 8;
    uint64_t *pages = malloc(len * 8 + 8);
    if (!pages || fread(pages, 8, len, f) != len) { fprintf(stderr, "cannot read %s\n", argv[1]); return 2; }
    fclose(f);

    uint32_t nb = 1;
    while (nb < 2u * (uint32_t)n) nb <<= 1;
    int32_t *heads = malloc(nb * sizeof *heads);
    struct entry *e = malloc((size_t)n * sizeof *e);
    for (uint32_t i = 0; i < nb; i++) heads[i] = -1;
    int used = 0, head = -1, tail = -1;
    uint64_t misses = 0;

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t i = 0; i < len; i++) {
        uint64_t p = pages[i];
        uint32_t b = bucket_of(p, nb - 1);
        int32_t k = heads[b];
        while (k >= 0 && e[k].page != p) k = e[k].chain;
        if (k >= 0) {
            if (k != head) { /* unlink, then push at the head */
                e[e[k].prev].next = e[k].next;
                if (e[k].next >= 0) e[e[k].next].prev = e[k].prev; else tail = e[k].prev;
                e[k].prev = -1; e[k].next = head; e[head].prev = k; head = k;
            }
            continue;
        }
        misses++;
        if (used < n) {
            k = used++;
        } else { /* evict the tail: unlink it from its bucket and the list */
            k = tail;
            uint32_t ob = bucket_of(e[k].page, nb - 1);
            int32_t *pp = &heads[ob];
            while (*pp != k) pp = &e[*pp].chain;
            *pp = e[k].chain;
            tail = e[k].prev;
            if (tail >= 0) e[tail].next = -1; else head = -1;
        }
        e[k].page = p;
        e[k].chain = heads[b];
        heads[b] = k;
        e[k].prev = -1; e[k].next = head;
        if (head >= 0) e[head].prev = k;
        head = k;
        if (tail < 0) tail = k;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%zu %llu %.6f\n", len, (unsigned long long)misses, s);
    return 0;
}
