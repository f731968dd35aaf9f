/* How far apart the machine's first two cores are: two threads, pinned to cores 0 and 1, pass
 * one cache line back and forth (each waits for the other's value, then writes its own), and
 * the mean round trip is printed. On a VM this changes as the host places the vCPUs: the
 * benchmark prints it next to the anchors, whose two-thread xlat runs depend on it and whose
 * one-thread peers do not (docs/performance.md, run P).
 * Build: cc -O2 -pthread -o pingpong benches/pingpong.c    Run: ./pingpong [ROUND_TRIPS]
 * Prints: round trip NS ns (or "n/a" with fewer than two cores) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Atomic long turn __attribute__((aligned(64)));
static long trips = 200000;

static int pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* Core 0's side: answers each odd value with the next even one. */
static void *answer(void *arg) {
    (void)arg;
    pin(0);
    for (long i = 0; i < trips; i++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 1) {
        }
        atomic_store_explicit(&turn, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) trips = atol(argv[1]);
    if (trips < 1) trips = 1;
    cpu_set_t all;
    if (sched_getaffinity(0, sizeof all, &all) != 0 || !CPU_ISSET(0, &all) || !CPU_ISSET(1, &all)) {
        printf("round trip n/a\n");
        return 0;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, answer, NULL) != 0 || pin(1) != 0) {
        printf("round trip n/a\n");
        return 0;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < trips; i++) {
        atomic_store_explicit(&turn, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 2) {
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(t, NULL);
    double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / trips;
    printf("round trip %.1f ns\n", ns);
    return 0;
}
