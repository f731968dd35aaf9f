/*
 * warehouse: a memory-resident order-entry load with a large, randomly accessed resident set,
 * after the OSDL DBT-2 benchmark as gray05 §3.4 ran it ("a large resident set size, and over
 * 30 000 TLB misses per second"). DBT-2 is a database server running TPC-C-like transactions;
 * this is the part of it that stresses the TLB: a stock table of MIB MiB of 256-byte records in
 * one anonymous mapping (every page written once at the start), then TXNS new-order
 * transactions, each ordering ITEMS (10, as TPC-C's average order) items chosen at random from
 * the whole table: it reads the item's record, checks its key, takes the quantity off its
 * stock (restocking by 91 when it falls below 10, as TPC-C's New-Order does) and adds it to the
 * record's year-to-date count. Deterministic (a seeded generator); at the end it checks that no
 * stock went missing (every record's stock + year-to-date - restocking = its initial stock) and
 * prints one summary line. Exit status 1 if the check fails, 2 for a usage error.
 * usage: warehouse MIB TXNS
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define RECSIZE 256
#define ITEMS 10
#define INITIAL 100

struct record {
    uint64_t key;
    uint64_t stock;
    uint64_t ytd;
    uint64_t restocked;
    unsigned char data[RECSIZE - 4 * sizeof(uint64_t)];
};

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: warehouse MIB TXNS\n");
        return 2;
    }
    long mib = atol(argv[1]), txns = atol(argv[2]);
    if (mib < 1 || mib > 65536 || txns < 0) {
        fprintf(stderr, "usage: warehouse MIB TXNS\n");
        return 2;
    }
    size_t records = (size_t)mib * (1024 * 1024 / RECSIZE);
    struct record *t = mmap(NULL, records * RECSIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (size_t i = 0; i < records; i++) {
        t[i].key = i;
        t[i].stock = INITIAL;
    }
    uint32_t seed = 20050410u;
    uint64_t ordered = 0;
    for (long n = 0; n < txns; n++) {
        for (int j = 0; j < ITEMS; j++) {
            seed = seed * 1664525u + 1013904223u;
            size_t i = (size_t)(seed >> 4) % records;
            uint64_t qty = 1 + (seed & 7);
            struct record *r = &t[i];
            if (r->key != i) return 1;
            if (r->stock < qty + 10) {
                r->stock += 91;
                r->restocked++;
            }
            r->stock -= qty;
            r->ytd += qty;
            ordered += qty;
        }
    }
    uint64_t ytd = 0;
    for (size_t i = 0; i < records; i++) {
        if (t[i].stock + t[i].ytd - 91 * t[i].restocked != INITIAL) return 1;
        ytd += t[i].ytd;
    }
    if (ytd != ordered) return 1;
    printf("warehouse: %zu records, %ld transactions, %llu items ordered\n", records, txns, (unsigned long long)ordered);
    return 0;
}
