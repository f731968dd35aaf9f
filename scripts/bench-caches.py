#!/usr/bin/env python3
"""Peer side of the cache benchmark: pycachesim over the same references as xlat's two-level
design (scripts/bench-caches.toml), handed over as an in-memory list of line addresses.

Usage: bench-caches.py TRACE.lackey [MAX_REFS]

Parses valgrind lackey text (not timed) into the 64-byte lines each reference touches (a modify is
a load then a store), then times pycachesim's loadstore over the whole list, best of 3 runs on a
fresh simulator: L1 32 KiB 8-way and L2 256 KiB 8-way, 64-byte lines, LRU, write-back with
write-allocate. Prints one JSON line.
"""
import json
import sys
import time

from cachesim import Cache, CacheSimulator, MainMemory

LINE = 64


def parse(path, max_refs):
    # pycachesim's loadstore takes (loads, stores) pairs and does each pair's loads, then its
    # stores: runs of loads followed by runs of stores go into one pair, in order, so that the
    # fewest Python objects are handed over (its fastest path for a given order of accesses).
    pairs = []
    loads, stores = [], []
    refs = 0

    def access(a, store):
        nonlocal loads, stores
        if store:
            stores.append(a)
        else:
            if stores:
                pairs.append((loads, stores))
                loads, stores = [], []
            loads.append(a)

    with open(path, "rb") as f:
        for raw in f:
            head = raw[:2]
            if head == b"I ":
                kind = "L"
            elif head in (b" L", b" S", b" M"):
                kind = chr(head[1])
            else:
                continue
            addr, size = raw[2:].strip().split(b",")
            addr = int(addr, 16)
            last = addr + max(int(size), 1) - 1
            for line in range(addr // LINE, last // LINE + 1):
                a = line * LINE
                if kind != "S":
                    access(a, False)
                if kind != "L":
                    access(a, True)
            refs += 1
            if refs == max_refs:
                break
    pairs.append((loads, stores))
    return refs, pairs


def simulator():
    mem = MainMemory()
    l2 = Cache("L2", 512, 8, LINE, "LRU", write_back=True, write_allocate=True)
    mem.load_to(l2)
    mem.store_from(l2)
    l1 = Cache("L1", 64, 8, LINE, "LRU", write_back=True, write_allocate=True, store_to=l2, load_from=l2)
    return CacheSimulator(l1, mem), l1, l2


def main():
    path = sys.argv[1]
    max_refs = int(sys.argv[2]) if len(sys.argv) > 2 else -1
    refs, pairs = parse(path, max_refs)
    accesses = sum(len(l) + len(s) for l, s in pairs)
    best = None
    for _ in range(3):
        cs, l1, l2 = simulator()
        t0 = time.perf_counter()
        cs.loadstore(pairs, length=1)
        t = time.perf_counter() - t0
        if best is None or t < best[0]:
            best = (t, l1.backend.MISS_count, l2.backend.MISS_count, l1.backend.LOAD_count + l1.backend.STORE_count)
    t, m1, m2, a1 = best
    print(json.dumps({
        "references": refs,
        "line_accesses": accesses,
        "seconds": round(t, 3),
        "m_line_accesses_per_s": round(accesses / t / 1e6, 1),
        "l1_accesses": a1,
        "l1_misses": m1,
        "l2_misses": m2,
    }))


if __name__ == "__main__":
    main()
