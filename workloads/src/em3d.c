/*
 * em3d: electromagnetic wave propagation on a bipartite graph, after the em3d benchmark as
 * swanson98 §3.1 ran it (6000 nodes in 4.5 MB of dynamically allocated space). N nodes: N/2 E
 * nodes (electric field) and N - N/2 H nodes (magnetic field). Each node has a value and DEGREE
 * neighbours in the other half, each with a coefficient; most neighbours are drawn uniformly by
 * a seeded generator (poor locality), one in eight near the node's own position. Every node's
 * record (its value, the next node of its half, and where its arrays are) and its arrays of
 * neighbour pointers and coefficients come from one anonymous mapping, carved in allocation
 * order like successive malloc() calls; the program asks for superpages on the whole of it
 * (madvise MADV_HUGEPAGE) once the graph is built and before the time steps, where the paper's
 * version called remap() (swanson98 §3.3: "em3d explicitly remaps 1120 pages of initialized
 * dynamic memory before initiating its time step iterations"). Then ITER time steps: every E node's value -= the sum over its
 * neighbours of coefficient * neighbour's value, then every H node's likewise.
 * The first and last steps are checked against a linear invariant: the sum of a half's values
 * falls by the sum over the other half of (value * total coefficient of the edges reaching it),
 * those totals being gathered while the graph is built.
 * usage: em3d N DEGREE ITER
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct node {
    double value;
    struct node *next;   /* the next node of the same half */
    struct node **from;  /* DEGREE neighbours in the other half */
    double *coeff;       /* their coefficients */
};

static void usage(void) {
    fprintf(stderr, "usage: em3d N DEGREE ITER\n");
    exit(2);
}

/* SplitMix64: the seeded generator of the graph. */
static uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double unit(uint64_t *s) {
    return (double)(next(s) >> 11) * (1.0 / 9007199254740992.0);
}

static long degree;

/* One half step: every node of list `l` takes its neighbours' contributions. */
static void compute(struct node *l) {
    for (struct node *p = l; p; p = p->next) {
        double v = p->value;
        struct node **f = p->from;
        double *c = p->coeff;
        for (long i = 0; i < degree; i++) v -= c[i] * f[i]->value;
        p->value = v;
    }
}

static double sum_values(struct node *l, double *abs_sum) {
    double s = 0, a = 0;
    for (struct node *p = l; p; p = p->next) {
        s += p->value;
        a += fabs(p->value);
    }
    if (abs_sum) *abs_sum += a;
    return s;
}

/* Sum over the nodes of `l` of value * weight (the weights in list order). */
static double weighted(struct node *l, const double *w, double *abs_sum) {
    double s = 0, a = 0;
    long i = 0;
    for (struct node *p = l; p; p = p->next, i++) {
        s += p->value * w[i];
        a += fabs(p->value * w[i]);
    }
    *abs_sum += a;
    return s;
}

/* Runs the half step on `l`, whose neighbours are `other` with incoming weights `w`, and checks
   the invariant if `check`. Returns 0 if the check failed. */
static int step(struct node *l, struct node *other, const double *w, int check) {
    double scale = 1, before = 0, fall = 0;
    if (check) {
        before = sum_values(l, &scale);
        fall = weighted(other, w, &scale);
    }
    compute(l);
    if (!check) return 1;
    double after = sum_values(l, &scale);
    return fabs(after - (before - fall)) <= 1e-9 * scale;
}

static size_t page_up(size_t n) {
    size_t p = (size_t)sysconf(_SC_PAGESIZE);
    return (n + p - 1) / p * p;
}

int main(int argc, char **argv) {
    if (argc != 4) usage();
    long n = atol(argv[1]), iter = atol(argv[3]);
    degree = atol(argv[2]);
    if (n < 2 || n > (1L << 26) || degree < 1 || degree > 4096 || iter < 1) usage();
    long ne = n / 2, nh = n - ne;

    /* The dynamically allocated space: per node its record, then its pointer and coefficient
       arrays (all 8-byte aligned). */
    size_t per_node = sizeof(struct node) + (size_t)degree * (sizeof(struct node *) + sizeof(double));
    size_t len = page_up((size_t)n * per_node);
    char *space = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (space == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    /* The check's incoming weights: separate, small, and not part of the graph. */
    double *w_e = calloc((size_t)ne, sizeof(double)), *w_h = calloc((size_t)nh, sizeof(double));
    if (!w_e || !w_h) return 1;

    /* Allocate in node order (E nodes, then H nodes), each node's arrays right after it. */
    struct node **nodes = malloc((size_t)n * sizeof *nodes);
    if (!nodes) return 1;
    char *at = space;
    for (long i = 0; i < n; i++) {
        struct node *p = (struct node *)at;
        at += sizeof(struct node);
        p->from = (struct node **)at;
        at += (size_t)degree * sizeof(struct node *);
        p->coeff = (double *)at;
        at += (size_t)degree * sizeof(double);
        nodes[i] = p;
    }
    struct node *e_list = nodes[0], *h_list = nodes[ne];

    /* Build the graph. */
    uint64_t seed = 0x5eed0e3dull;
    for (long i = 0; i < n; i++) {
        int is_e = i < ne;
        long own = is_e ? i : i - ne, other_n = is_e ? nh : ne, other_base = is_e ? ne : 0;
        struct node *p = nodes[i];
        p->value = unit(&seed);
        p->next = (i + 1 == ne || i + 1 == n) ? NULL : nodes[i + 1];
        for (long k = 0; k < degree; k++) {
            long j;
            if (next(&seed) % 8 == 0) {
                /* Near: within 8 places of the node's own position in the other half. */
                j = (own * other_n / (is_e ? ne : nh) + (long)(next(&seed) % 17) - 8 + other_n) % other_n;
            } else {
                j = (long)(next(&seed) % (uint64_t)other_n);
            }
            double c = (unit(&seed) * 2 - 1) / (double)degree;
            p->from[k] = nodes[other_base + j];
            p->coeff[k] = c;
            (is_e ? w_h : w_e)[j] += c;
        }
    }
    free(nodes);
    /* Superpages for all of it, now initialised (the paper's remap()); only a hint, so its
       result is ignored. */
    (void)madvise(space, len, MADV_HUGEPAGE);

    int ok = 1;
    for (long t = 0; t < iter; t++) {
        int check = t == 0 || t == iter - 1;
        ok &= step(e_list, h_list, w_h, check);
        ok &= step(h_list, e_list, w_e, check);
    }
    double abs_sum = 0, e = sum_values(e_list, &abs_sum), h = sum_values(h_list, &abs_sum);
    ok &= isfinite(abs_sum);
    printf("em3d: %ld nodes, degree %ld, %ld iterations, %zu bytes: %s (sum E %.9g, sum H %.9g)\n", n, degree, iter,
           len, ok ? "checked" : "WRONG", e, h);
    munmap(space, len);
    free(w_e);
    free(w_h);
    return ok ? 0 : 1;
}
