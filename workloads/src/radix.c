/*
 * radix: a sequential least-significant-digit radix sort of N integer keys, after the SPLASH-2
 * radix kernel as swanson98 §3.1 ran it (its default radix 1024 and maximum key 524288, with
 * 1,048,576 keys). All the large data structures are allocated at the start, as one anonymous
 * mapping: the two key arrays (keys go from one to the other on every pass, then back) and a
 * rank (histogram) array of RADIX counters per digit. The program asks for superpages on that
 * whole mapping (madvise MADV_HUGEPAGE) after allocating it and before initialising anything in
 * it, where the paper's version called remap(). The keys come from a seeded generator; each pass
 * counts the keys per value of its digit, turns the counts into starting ranks, and moves every
 * key to its rank in the other array (a stable pass). The result is checked: sorted, and the
 * same multiset of keys (count, sum and a sum of hashed keys).
 * usage: radix N [RADIX [MAXKEY]]   (RADIX a power of two, default 1024; keys in [0, MAXKEY),
 *                                    default 524288)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static void usage(void) {
    fprintf(stderr, "usage: radix N [RADIX [MAXKEY]]\n");
    exit(2);
}

/* SplitMix64: the seeded generator of the keys. */
static uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A hash of one key, for the multiset check. */
static uint64_t mix(uint64_t k) {
    k = (k ^ (k >> 16)) * 0x45d9f3b3335b369ull;
    return k ^ (k >> 29);
}

static size_t page_up(size_t n) {
    size_t p = (size_t)sysconf(_SC_PAGESIZE);
    return (n + p - 1) / p * p;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) usage();
    long n = atol(argv[1]);
    long radix = argc > 2 ? atol(argv[2]) : 1024;
    long maxkey = argc > 3 ? atol(argv[3]) : 524288;
    if (n < 1 || n > (1L << 30) || radix < 2 || radix > 65536 || (radix & (radix - 1)) != 0 || maxkey < 1 ||
        maxkey > (1L << 31))
        usage();
    int log_radix = 0;
    while ((1L << log_radix) < radix) log_radix++;
    /* Digits needed for the largest key, maxkey - 1 (at least one pass). */
    int passes = 1;
    for (uint64_t m = (uint64_t)(maxkey - 1) >> log_radix; m > 0; m >>= log_radix) passes++;

    /* The dynamically allocated space: key arrays from and to, then the rank arrays. */
    size_t keys_bytes = page_up((size_t)n * sizeof(uint32_t));
    size_t rank_bytes = page_up((size_t)passes * (size_t)radix * sizeof(long));
    size_t len = 2 * keys_bytes + rank_bytes;
    char *space = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (space == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    /* Superpages for all of it (the paper's remap()); only a hint, so its result is ignored. */
    (void)madvise(space, len, MADV_HUGEPAGE);
    uint32_t *from = (uint32_t *)space, *to = (uint32_t *)(space + keys_bytes);
    long *rank = (long *)(space + 2 * keys_bytes);

    uint64_t seed = 0x5eed0001ull, sum = 0, hashed = 0;
    for (long i = 0; i < n; i++) {
        uint32_t k = (uint32_t)(next(&seed) % (uint64_t)maxkey);
        from[i] = k;
        sum += k;
        hashed += mix(k);
    }

    for (int d = 0; d < passes; d++) {
        int shift = d * log_radix;
        long *r = rank + (size_t)d * (size_t)radix;
        for (long v = 0; v < radix; v++) r[v] = 0;
        for (long i = 0; i < n; i++) r[(from[i] >> shift) & (uint32_t)(radix - 1)]++;
        long at = 0;
        for (long v = 0; v < radix; v++) {
            long c = r[v];
            r[v] = at;
            at += c;
        }
        for (long i = 0; i < n; i++) {
            uint32_t k = from[i];
            to[r[(k >> shift) & (uint32_t)(radix - 1)]++] = k;
        }
        uint32_t *t = from;
        from = to;
        to = t;
    }

    /* The sorted keys are in `from`. */
    uint64_t sum2 = 0, hashed2 = 0;
    long unsorted = 0;
    for (long i = 0; i < n; i++) {
        if (i > 0 && from[i - 1] > from[i]) unsorted++;
        sum2 += from[i];
        hashed2 += mix(from[i]);
    }
    int ok = unsorted == 0 && sum2 == sum && hashed2 == hashed;
    printf("radix: %ld keys, radix %ld, max key %ld, %d passes, %zu bytes: %s (key sum %llu, min %u, max %u)\n", n,
           radix, maxkey, passes, len, ok ? "sorted" : "WRONG", (unsigned long long)sum2, from[0], from[n - 1]);
    munmap(space, len);
    return ok ? 0 : 1;
}
