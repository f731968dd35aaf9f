"""The benchmark's libCacheSim anchor: its LRU with ENTRIES objects of size 1 over the page
stream in oracleGeneral format (written by the `pages` example), run by libCacheSim's C core
(`process_trace`). Usage: python libcachesim_lru.py PAGES.oracleGeneral [ENTRIES [RUNS]]
Prints: lookups misses seconds (best of RUNS, default 3; each run reads the file through
libCacheSim's reader)."""
import sys
import time

import libcachesim as lcs

path = sys.argv[1]
entries = int(sys.argv[2]) if len(sys.argv) > 2 else 64
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
best = None
for _ in range(runs):
    reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE)
    cache = lcs.LRU(cache_size=entries)
    t = time.perf_counter()
    miss_ratio, _ = cache.process_trace(reader)
    s = time.perf_counter() - t
    best = s if best is None or s < best else best
n = reader.get_num_of_req() if hasattr(reader, "get_num_of_req") else len(reader)
print(n, round(miss_ratio * n), f"{best:.6f}")
