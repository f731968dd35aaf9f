/*
 * churn: allocator churn in THREADS threads of one process, the address-space traffic of a
 * multi-threaded allocator. Each thread, ROUNDS times: maps an anonymous buffer of 1 to KB
 * kilobytes (sizes from a seeded generator per thread), writes one word per page, reads it
 * back, gives the upper half back with madvise(MADV_DONTNEED) (as allocators purge free
 * memory), touches the whole buffer again (the upper half faults afresh), and unmaps it.
 * Every 8 rounds a thread adds its sum to a shared total under a mutex, so the threads also
 * synchronise. Prints the total.
 * usage: churn THREADS ROUNDS KB
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static long rounds, kb;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t total;

static void usage(void) {
    fprintf(stderr, "usage: churn THREADS ROUNDS KB\n");
    exit(2);
}

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *worker(void *arg) {
    uint64_t seed = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1), sum = 0;
    const size_t page = 4096;
    for (long r = 0; r < rounds; r++) {
        size_t len = (1 + next(&seed) % (uint64_t)kb) * 1024;
        len = (len + page - 1) & ~(page - 1);
        char *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b == MAP_FAILED) {
            perror("mmap");
            exit(1);
        }
        for (size_t o = 0; o < len; o += page) ((volatile uint64_t *)(b + o))[0] = o ^ (uint64_t)r;
        for (size_t o = 0; o < len; o += page) sum += ((volatile uint64_t *)(b + o))[0];
        size_t half = (len / 2) & ~(page - 1);
        if (half && madvise(b + half, len - half, MADV_DONTNEED) != 0) {
            perror("madvise");
            exit(1);
        }
        for (size_t o = 0; o < len; o += page) sum += ((volatile uint64_t *)(b + o))[0]++;
        if (munmap(b, len) != 0) {
            perror("munmap");
            exit(1);
        }
        if (r % 8 == 7) {
            pthread_mutex_lock(&lock);
            total += sum;
            pthread_mutex_unlock(&lock);
            sum = 0;
        }
    }
    pthread_mutex_lock(&lock);
    total += sum;
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) usage();
    long threads = atol(argv[1]);
    rounds = atol(argv[2]);
    kb = atol(argv[3]);
    if (threads < 1 || threads > 64 || rounds < 1 || kb < 1) usage();
    pthread_t t[64];
    for (long i = 0; i < threads; i++) {
        if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) != 0) {
            fprintf(stderr, "churn: cannot create thread %ld\n", i);
            return 1;
        }
    }
    for (long i = 0; i < threads; i++) pthread_join(t[i], NULL);
    printf("%llu\n", (unsigned long long)total);
    return 0;
}
