#!/usr/bin/env bash
# Whole-run benchmark: million lookups (or references) per second of the real `xlat` binary for
#   - lackey text parsing            (xlat info --quick on a lackey file)
#   - .xtr decoding                  (xlat info --quick on an .xtr file)
#   - .xtr + 64-entry fully associative LRU TLB + 4-level radix table, end to end (xlat run),
#     on a real trace and on a 10M-reference synthetic trace with about 40% misses, and on two
#     traces with large footprints: `mix` (10M references in bursts of sequential, strided and
#     Zipf references over 16,384 pages, 64 MB, about 40% misses: `xlat gen --pattern mix`) and
#     `python` (a 24M-reference window of the workload suite's full-size python-dict run, 18 MB
#     touched in the window, from the 2,600,000,000th reference on)
#   - the marginal cost of one more design in the same pass (4 designs minus 1, per design)
#   - Itanium regions, layout and protection keys against the same design without them
#   - the mach3 personality (bala94) against the plain R3000 design on a traced IPC workload
#   - the anchors on the same page-number stream: libCacheSim's LRU (PyPI, in target/bench-venv, under $CARGO_TARGET_DIR if set)
#     and a hand-written C loop (benches/fa_lru.c), as ratios of xlat's end-to-end throughput,
#     with the round trip of a cache line between the first two cores before and after
#     (benches/pingpong.c)
#   - `xlat curve` (every fully associative size, 1..4096) against one FA-64 run, and
#     `xlat run --jobs N` scaling with 4 designs
# BENCH_LONG=1 also runs a curve and a run over a generated 10^9-reference trace (piped, never
# written) and prints their peak memory.
# Each figure is the best of 3 runs; the anchors section takes the best of BENCH_ROUNDS (default 5)
# rounds that run xlat, the C loop and libCacheSim once each, so that drift hits all three alike.
# The cores section gives the best and the median of BENCH_ROUNDS alternated runs of each design.
# Traces are made once into target/bench-data/ (under $CARGO_TARGET_DIR if set).
# The real trace is valgrind lackey of `sort` on 10,000 generated lines (needs valgrind; without
# it the bundled data/ trace is used, which is small and so noisier). The python window is cut
# (crates/xlat/examples/window.rs) from python-dict.xtr of the full-size suite, found in
# $BENCH_WORKLOADS, $XDG_CACHE_HOME/xlat/workloads/full or target/workloads/full, else built
# there once with `xlat workloads build --size full --only python-dict` (QEMU, about 6 minutes).
# BENCH_XLAT=PATH times another build of xlat (e.g. an older one) on the same traces.
# Sections (all but `long` by default; name some to run only those):
#   decode run formats tracing caches itanium mach3 anchors curve jobs cores long
# e.g. `scripts/bench.sh anchors curve jobs`; BENCH_LONG=1 adds `long` to the default set.
set -euo pipefail
export LC_NUMERIC=C  # a decimal point in $EPOCHREALTIME and bc's input

cd "$(dirname "$0")/.."
cargo build --release -q -p xlat-cli
T=${CARGO_TARGET_DIR:-target}
# G makes the traces; X is the binary timed.
G=$T/release/xlat
X=${BENCH_XLAT:-$G}
D=$T/bench-data
mkdir -p "$D"

# Traces written by an xlat whose writer made other frames are made again (from the kept lackey
# text): the figures are for files as xlat writes them now.
STAMP="xtr zstd frames of 256 KiB (literals raw where Huffman coding saves little), lz4 frames of 128 KiB"
if [ "$(cat "$D/traces.stamp" 2>/dev/null)" != "$STAMP" ]; then
  rm -f "$D/real.xtr" "$D/real.xtr.lz4" "$D/synthetic.xtr"
  if [ -f "$D/real.lackey" ]; then "$G" convert "$D/real.lackey" "$D/real.xtr" 2>/dev/null; fi
  echo "$STAMP" > "$D/traces.stamp"
fi
if [ ! -f "$D/real.xtr" ]; then
  if command -v valgrind >/dev/null; then
    awk 'BEGIN { srand(7); for (i = 0; i < 10000; i++) { s = ""; for (j = 0; j < 8; j++) s = s sprintf("%c", 97 + int(rand() * 26)); print s, int(rand() * 100000) } }' > "$D/input.txt"
    ( cd "$D" && LC_ALL=C valgrind --tool=lackey --trace-mem=yes --log-file=real.lackey sort input.txt > /dev/null )
  else
    echo "valgrind not found: using the bundled trace (small)" >&2
    zstd -dc data/sort-400.lackey.zst > "$D/real.lackey"
  fi
  "$G" convert "$D/real.lackey" "$D/real.xtr" 2>/dev/null
fi
# The real trace in LZ4 frames too (`.xtr.lz4`: about twice the size, faster to decompress).
[ -f "$D/real.xtr.lz4" ] || "$G" convert "$D/real.xtr" "$D/real.xtr.lz4" 2>/dev/null
[ -f "$D/synthetic.xtr" ] || "$G" gen --pattern uniform --refs 10000000 --footprint 438272 --seed 7 -o "$D/synthetic.xtr"
# Large footprints: the mix over 16,384 pages (a stride of 2 KB: a strided burst misses every
# other reference; about 40 % misses in all for FA-64), and the python window.
[ -f "$D/mix.xtr" ] || "$G" gen --pattern mix --refs 10000000 --footprint 64M --stride 2K --burst 1000 --seed 7 -o "$D/mix.xtr"
if [ ! -f "$D/python.xtr" ]; then
  src=""
  for dir in "${BENCH_WORKLOADS:-}" "${XDG_CACHE_HOME:+$XDG_CACHE_HOME/xlat/workloads/full}" target/workloads/full; do
    if [ -n "$dir" ] && [ -f "$dir/python-dict.xtr" ] && grep -q '"size": "full"' "$dir/python-dict.json" 2>/dev/null; then
      src=$dir/python-dict.xtr
      break
    fi
  done
  if [ -z "$src" ] && command -v qemu-x86_64 >/dev/null; then
    "$G" workloads build --size full --only python-dict --no-snapshot --dir "$D/workloads" >&2
    src=$D/workloads/python-dict.xtr
  fi
  if [ -n "$src" ]; then
    cargo build --release -q -p xlat --example window
    "$T/release/examples/window" "$src" "$D/python.xtr" 2600000000 24000000 > /dev/null
  else
    echo "no full-size python-dict trace and no qemu-user: the python window is skipped" >&2
  fi
fi
# Its first 4 M references as lackey text, for pycachesim (the caches section).
if [ -f "$D/python.xtr" ] && [ ! -f "$D/python-4m.lackey" ]; then
  cargo build --release -q -p xlat --example window
  "$T/release/examples/window" "$D/python.xtr" "$D/python-4m.xtr" 0 4000000 > /dev/null
  "$G" convert "$D/python-4m.xtr" "$D/python-4m.lackey" 2>/dev/null
fi
large=()
for t in mix python; do [ -f "$D/$t.xtr" ] && large+=("$t"); done
cat > "$D/fa64.toml" <<'TOML'
name = "fa64"
[[tlb]]
name = "L1"
entries = 64
ways = 64
policy = "lru"
[page_table]
kind = "radix"
TOML
for i in 2 3 4; do sed "s/^name = \"fa64\"/name = \"fa64-$i\"/" "$D/fa64.toml" > "$D/fa64-$i.toml"; done

secs() { # wall seconds of one run of "$@", from just before it starts to just after it ends
  # (bash's clock: a `date` on each side would add its own start-up, about 1-2 ms here)
  local s e
  s=$EPOCHREALTIME; "$@" > /dev/null 2>&1; e=$EPOCHREALTIME
  echo "$e - $s" | bc -l
}
least() { printf "%s\n" "$@" | sort -g | head -1; }
median() { printf "%s\n" "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
best() { # best wall seconds of 3 runs of "$@"
  least "$(secs "$@")" "$(secs "$@")" "$(secs "$@")"
}
count() { "$X" info --quick --json - "$1" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["references"], d["input_bytes"])'; }
lookups() { "$X" run -c "$D/fa64.toml" -t "$1" --json - | python3 -c 'import json,sys; d=json.load(sys.stdin); c=d["configs"][0]; print(d["trace"]["lookups"], c["tlb"][0]["misses"])'; }

sections=("$@")
if [ ${#sections[@]} -eq 0 ]; then
  sections=(decode run formats tracing caches itanium mach3 anchors curve jobs cores)
  [ "${BENCH_LONG:-0}" = 1 ] && sections+=(long)
fi
want() { [[ " ${sections[*]} " == *" $1 "* ]]; }

read -r xr_refs _ < <(count "$D/real.xtr")
printf "%-46s %10s %10s\n" "benchmark" "seconds" "rate"
if want decode; then
  read -r lk_refs lk_bytes < <(count "$D/real.lackey")
  t_lk=$(best "$X" info --quick "$D/real.lackey")
  t_xr=$(best "$X" info --quick "$D/real.xtr")
  printf "%-46s %10.3f %7.1f MB/s (%.1f M refs/s)\n" "lackey parsing ($lk_refs refs)" "$t_lk" "$(echo "$lk_bytes / $t_lk / 1000000" | bc -l)" "$(echo "$lk_refs / $t_lk / 1000000" | bc -l)"
  printf "%-46s %10.3f %7.1f M records/s\n" "xtr decoding ($xr_refs refs)" "$t_xr" "$(echo "$xr_refs / $t_xr / 1000000" | bc -l)"
fi
if want run; then
  for t in real synthetic "${large[@]}"; do
    read -r n misses < <(lookups "$D/$t.xtr")
    t1=$(best "$X" run -q -c "$D/fa64.toml" -t "$D/$t.xtr")
    t4=$(best "$X" run -q -c "$D/fa64.toml" -c "$D/fa64-2.toml" -c "$D/fa64-3.toml" -c "$D/fa64-4.toml" -t "$D/$t.xtr")
    printf "%-46s %10.3f %7.1f M lookups/s (miss ratio %.1f%%)\n" "xtr + FA-64 LRU + radix, $t ($n lookups)" "$t1" "$(echo "$n / $t1 / 1000000" | bc -l)" "$(echo "100 * $misses / $n" | bc -l)"
    printf "%-46s %10.3f %7.1f M lookups/s per design\n" "  each extra design in the same pass" "$(echo "($t4 - $t1) / 3" | bc -l)" "$(echo "3 * $n / ($t4 - $t1) / 1000000" | bc -l)"
  done
fi
# The TLB entry formats (talluri95 preset: 64-entry FA TLB, clustered table) with the OS support
# each needs, whole runs on the real trace: superpage/subblock throughput against single.
if want formats || want jobs; then
  read -r n _ < <(lookups "$D/real.xtr")
  for f in single superpage partial-subblock complete-subblock; do
    case $f in
      superpage) os='reservation = true
  superpages = "promote"' ;;
      partial-subblock) os='reservation = true
  partial_subblock = true' ;;
      *) os='' ;;
    esac
    "$X" presets --show talluri95 | sed "s/^format = \"single\"/format = \"$f\"/" > "$D/t95-$f.toml"
    [ "$f" = complete-subblock ] && sed -i 's/^format = "complete-subblock"$/&\nprefetch = true/' "$D/t95-$f.toml"
    printf '[os]\nframe_allocator = "buddy"\n%s\n' "$os" >> "$D/t95-$f.toml"
    want formats || continue
    t=$(best "$X" run -q -c "$D/t95-$f.toml" -t "$D/real.xtr")
    printf "%-46s %10.3f %7.1f M lookups/s\n" "talluri95 preset, $f TLB, real" "$t" "$(echo "$n / $t / 1000000" | bc -l)"
  done
fi

# Tracing (QEMU backend) and online simulation of the same program: references per wall second.
if ! want tracing; then
  :
elif command -v qemu-x86_64 >/dev/null && command -v gzip >/dev/null; then
  [ -f "$D/trace-input.txt" ] || awk 'BEGIN { srand(3); for (i = 0; i < 7000; i++) { for (j = 0; j < 76; j++) printf "%c", 65 + int(rand() * 58); printf "\n" } }' > "$D/trace-input.txt"
  read -r refs < <("$X" trace -o "$D/gzip.xtr" -- gzip -c "$D/trace-input.txt" 2>&1 >/dev/null | sed -n 's/^traced \([0-9]*\) references.*/\1/p')
  t_tr=$(best "$X" trace -o "$D/gzip.xtr" -- gzip -c "$D/trace-input.txt")
  t_on=$(best "$X" run -q -p x86-64 -- gzip -c "$D/trace-input.txt")
  printf "%-46s %10.3f %7.1f M refs/s\n" "xlat trace -- gzip ($refs refs)" "$t_tr" "$(echo "$refs / $t_tr / 1000000" | bc -l)"
  printf "%-46s %10.3f %7.1f M refs/s (%.2fx tracing)\n" "xlat run -p x86-64 -- gzip (online)" "$t_on" "$(echo "$refs / $t_on / 1000000" | bc -l)" "$(echo "$t_on / $t_tr" | bc -l)"
else
  echo "qemu-x86_64 not found: tracing benchmarks skipped (apt-get install qemu-user)" >&2
fi

# Caches: a TLB, a radix table and two unified cache levels (scripts/bench-caches.toml), end to end
# from the real .xtr, against the same design without caches and against pycachesim simulating the
# same two caches over the same references as an in-memory list of line addresses.
if want caches; then
  sed '/^\[\[cache\]\]/,$d' scripts/bench-caches.toml > "$D/bench-nocache.toml"
  t0=$(best "$X" run -q -c "$D/bench-nocache.toml" -t "$D/real.xtr")
  t2=$(best "$X" run -q -c scripts/bench-caches.toml -t "$D/real.xtr")
  lines=$("$X" run -q -c scripts/bench-caches.toml -t "$D/real.xtr" --json - | python3 -c 'import json,sys; print(json.load(sys.stdin)["configs"][0]["caches"][0]["accesses"])')
  printf "%-46s %10.3f\n" "TLB + radix, no caches, real" "$t0"
  printf "%-46s %10.3f %7.1f M L1 line accesses/s (%.2fx the speed without caches)\n" "TLB + radix + L1/L2, real" "$t2" "$(echo "$lines / $t2 / 1000000" | bc -l)" "$(echo "$t0 / $t2" | bc -l)"
  V=$T/bench-venv
  if [ ! -x "$V/bin/python" ]; then
    python3 -m venv "$V" || { apt-get install -y python3-venv >/dev/null && python3 -m venv "$V"; }
  fi
  "$V/bin/python" -c 'import cachesim' 2>/dev/null || "$V/bin/pip" install -q pycachesim
  printf "%-46s %s\n" "pycachesim, same L1/L2, in-memory line list" "$("$V/bin/python" scripts/bench-caches.py "$D/real.lackey")"
  # The same on the python window's first 4 M references (a large footprint), xlat end to end
  # from the .xtr: its best and median of BENCH_ROUNDS runs; pycachesim's best of 3 over the
  # line list already in memory (made from the same references as lackey text).
  if [ -f "$D/python-4m.lackey" ]; then
    read -r py_lines py_secs < <("$V/bin/python" scripts/bench-caches.py "$D/python-4m.lackey" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["l1_accesses"], d["seconds"])')
    xs=()
    for _ in $(seq "${BENCH_ROUNDS:-5}"); do
      "$X" run -q -c scripts/bench-caches.toml -t "$D/python-4m.xtr" > /dev/null 2>&1
      xs+=("$(secs "$X" run -q -c scripts/bench-caches.toml -t "$D/python-4m.xtr")")
    done
    tb=$(least "${xs[@]}") tm=$(median "${xs[@]}")
    lines=$("$X" run -q -c scripts/bench-caches.toml -t "$D/python-4m.xtr" --json - | python3 -c 'import json,sys; print(json.load(sys.stdin)["configs"][0]["caches"][0]["accesses"])')
    printf "%-46s %10.3f %7.1f M L1 line accesses/s (median %.3f s)\n" "TLB + radix + L1/L2, python 4M" "$tb" "$(echo "$lines / $tb / 1000000" | bc -l)" "$tm"
    printf "%-46s %10.3f %7.1f M L1 line accesses/s  xlat/pycachesim %.2fx (median %.2fx)\n" "pycachesim, same, python 4M" "$py_secs" "$(echo "$py_lines / $py_secs / 1000000" | bc -l)" "$(echo "$py_secs / $tb" | bc -l)" "$(echo "$py_secs / $tm" | bc -l)"
  fi

fi

# Itanium: the same TLBs and long VHPT with and without the itanium-linux layout, region IDs,
# shared text, the global shared region and protection keys (scripts/bench-itanium.toml).
if want itanium; then
  sed -e '/^\[layout\]/,$d' -e 's/^name = "itanium-keys"/name = "itanium-plain"/' scripts/bench-itanium.toml > "$D/bench-itanium-plain.toml"
  tp=$(best "$X" run -q -c "$D/bench-itanium-plain.toml" -t "$D/real.xtr")
  tk=$(best "$X" run -q -c scripts/bench-itanium.toml -t "$D/real.xtr")
  printf "%-46s %10.3f %7.1f M refs/s\n" "long VHPT, no regions or keys, real" "$tp" "$(echo "$xr_refs / $tp / 1000000" | bc -l)"
  printf "%-46s %10.3f %7.1f M refs/s (%.2fx the speed without)\n" "long VHPT + layout, regions, keys, real" "$tk" "$(echo "$xr_refs / $tk / 1000000" | bc -l)" "$(echo "$tp / $tk" | bc -l)"
fi

# Mach 3.0 (bala94): a traced IPC workload (mdb: a server and 3 clients over pipes) through the
# plain R3000 design (mips-r3000), the mach3 personality (kernel references for every IPC and
# system call, Mach's page-table hierarchy and cascades) and mach3 with a DM 4K STLB and the PTLB.
if ! want mach3; then
  :
elif command -v qemu-x86_64 >/dev/null && command -v cc >/dev/null; then
  if [ ! -f "$D/mdb.xtr" ]; then
    "$X" trace -o "$D/mdb.xtr" -- "$("$X" workloads program mdb)" 3 65536 256 1000 8 "$D/mdb.dat" >/dev/null 2>&1
  fi
  "$X" presets --show mach3-r3000 | sed 's/^name = "mach3-r3000"/name = "mach3-stlb-ptlb"/' > "$D/mach3-stlb-ptlb.toml"
  printf '[stlb]\nentries = 4096\nways = 1\n[ptlb]\nentries = 4096\n' >> "$D/mach3-stlb-ptlb.toml"
  read -r mdb_refs _ < <(count "$D/mdb.xtr")
  tr=$(best "$X" run -q -p mips-r3000 -t "$D/mdb.xtr")
  tm=$(best "$X" run -q -p mach3-r3000 -t "$D/mdb.xtr")
  ts=$(best "$X" run -q -c "$D/mach3-stlb-ptlb.toml" -t "$D/mdb.xtr")
  printf "%-46s %10.3f %7.1f M refs/s\n" "mips-r3000, mdb ($mdb_refs refs)" "$tr" "$(echo "$mdb_refs / $tr / 1000000" | bc -l)"
  printf "%-46s %10.3f %7.1f M refs/s (%.2fx mips-r3000)\n" "mach3-r3000, mdb" "$tm" "$(echo "$mdb_refs / $tm / 1000000" | bc -l)" "$(echo "$tr / $tm" | bc -l)"
  printf "%-46s %10.3f %7.1f M refs/s (%.2fx mips-r3000)\n" "mach3-r3000 + DM 4K STLB + PTLB, mdb" "$ts" "$(echo "$mdb_refs / $ts / 1000000" | bc -l)" "$(echo "$tr / $ts" | bc -l)"
else
  echo "qemu-x86_64 or cc not found: the mach3 benchmark is skipped" >&2
fi


# Anchors: the page-number stream the FA-64 design's TLB sees, replayed by libCacheSim's LRU (its
# C core through process_trace, reading oracleGeneral) and by a hand-written C loop (hash chains +
# LRU list, simulation only, stream already in memory). xlat's figure is end to end from .xtr;
# the anchors' figures leave out reading their input. A ratio above 1 means xlat is faster.
if want anchors; then
  V=$T/bench-venv
  if [ ! -x "$V/bin/python" ]; then
    python3 -m venv "$V" || { apt-get install -y python3-venv >/dev/null && python3 -m venv "$V"; }
  fi
  "$V/bin/python" -c 'import libcachesim' 2>/dev/null || "$V/bin/pip" install -q libcachesim
  cargo build --release -q -p xlat --example pages
  cc -O2 -o "$D/fa_lru" benches/fa_lru.c
  cc -O2 -pthread -o "$D/pingpong" benches/pingpong.c
  for trace in synthetic.xtr real.xtr real.xtr.lz4 "${large[@]/%/.xtr}"; do
    # The real trace twice: as xlat writes an .xtr (zstd), and as .xtr.lz4 (LZ4); the anchors
    # read the same page numbers for both.
    t=${trace%%.*} f="$D/$trace" label=${trace%%.*}
    [ "$trace" = real.xtr.lz4 ] && label="real .lz4"
    # How far apart the two cores are, before and after the rounds: on a VM it changes as the
    # host places the vCPUs, and xlat's reader and simulation threads feel it (docs/performance.md).
    rtt0=$("$D/pingpong" | sed 's/^round trip //')
    [ -f "$D/$t.pages.u64" ] || "$T/release/examples/pages" "$D/$t.xtr" "$D/$t.pages.u64" "$D/$t.pages.og" > /dev/null
    read -r n misses < <(lookups "$f")
    # Rounds of one run of each, so that a machine whose speed drifts (a shared VM) slows all
    # three alike; the best of each over the rounds. Each timed run comes right after an
    # untimed one of the same program: on the VM, a two-thread run that follows a second of
    # one busy core (libCacheSim's) took about 40 % longer than one that follows another
    # run (docs/performance.md), which the one-thread peers do not feel.
    # libCacheSim reads its input through its own reader while it is timed, and how fast that
    # goes depends on how the file sits in the page cache: 0.31 s against 0.26 s for the same
    # real trace after a long session, 0.26 s from a fresh copy (docs/performance.md). A fresh
    # copy each time, so that the anchor is timed in its faster state.
    cp "$D/$t.pages.og" "$D/anchor.og"
    xs=() css=() lss=()
    for _ in $(seq "${BENCH_ROUNDS:-5}"); do
      "$X" run -q -c "$D/fa64.toml" -t "$f" > /dev/null 2>&1
      xs+=("$(secs "$X" run -q -c "$D/fa64.toml" -t "$f")")
      "$D/fa_lru" "$D/$t.pages.u64" 64 > /dev/null
      read -r cn cm c < <("$D/fa_lru" "$D/$t.pages.u64" 64)
      "$V/bin/python" benches/libcachesim_lru.py "$D/anchor.og" 64 1 > /dev/null
      read -r ln lm l < <("$V/bin/python" benches/libcachesim_lru.py "$D/anchor.og" 64 1)
      css+=("$c") lss+=("$l")
    done
    # The best of each, and the ratios of the medians too.
    tx=$(least "${xs[@]}") cs=$(least "${css[@]}") ls=$(least "${lss[@]}")
    mx=$(median "${xs[@]}") mc=$(median "${css[@]}") ml=$(median "${lss[@]}")
    rtt1=$("$D/pingpong" | sed 's/^round trip //')
    rm -f "$D/anchor.og"
    [ "$cn" = "$n" ] && [ "$ln" = "$n" ] && [ "$cm" = "$misses" ] && [ "$lm" = "$misses" ] ||
      echo "warning: $t: anchors disagree: xlat $n lookups $misses misses, C $cn $cm, libCacheSim $ln $lm (a trace's unmaps and exits shoot down TLB entries, which the page stream does not show)" >&2
    printf "%-46s %10.3f %7.1f M lookups/s (miss ratio %.1f%%)\n" "xlat FA-64 LRU + radix, $label, end to end" "$tx" "$(echo "$n / $tx / 1000000" | bc -l)" "$(echo "100 * $misses / $n" | bc -l)"
    printf "%-46s %10.3f %7.1f M lookups/s  xlat/C loop %.2fx (medians %.2fx)\n" "C loop (benches/fa_lru.c), $label" "$cs" "$(echo "$n / $cs / 1000000" | bc -l)" "$(echo "$cs / $tx" | bc -l)" "$(echo "$mc / $mx" | bc -l)"
    printf "%-46s %10.3f %7.1f M lookups/s  xlat/libCacheSim %.2fx (medians %.2fx)\n" "libCacheSim LRU (process_trace), $label" "$ls" "$(echo "$n / $ls / 1000000" | bc -l)" "$(echo "$ls / $tx" | bc -l)" "$(echo "$ml / $mx" | bc -l)"
    printf "%-46s %10s %s before, %s after (benches/pingpong.c)\n" "  cross-core round trip" "" "$rtt0" "$rtt1"
  done
fi

# Every fully associative size from 1 to 4096 in one pass (LRU stack distances), against one FA-64
# run on the same trace; then with per-set stacks for 1, 2, 4 and 8 ways too.
if want curve; then
  for t in synthetic real; do
    read -r n _ < <(lookups "$D/$t.xtr")
    tx=$(best "$X" run -q -c "$D/fa64.toml" -t "$D/$t.xtr")
    tc=$(best "$X" curve -q -t "$D/$t.xtr" --entries 1..4096)
    tcs=$(best "$X" curve -q -t "$D/$t.xtr" --entries 1..4096 --ways full,1,2,4,8)
    printf "%-46s %10.3f %7.1f M lookups/s\n" "xlat run FA-64, $t" "$tx" "$(echo "$n / $tx / 1000000" | bc -l)"
    printf "%-46s %10.3f %7.1f M lookups/s (%.2fx the FA-64 run's speed)\n" "xlat curve --entries 1..4096, $t" "$tc" "$(echo "$n / $tc / 1000000" | bc -l)" "$(echo "$tx / $tc" | bc -l)"
    printf "%-46s %10.3f %7.1f M lookups/s (%.2fx)\n" "  --ways full,1,2,4,8" "$tcs" "$(echo "$n / $tcs / 1000000" | bc -l)" "$(echo "$tx / $tcs" | bc -l)"
  done
fi

# --jobs scaling: four designs (the x86-64 preset, FA-64 + radix, talluri95 single, itanium2) over
# the real trace on 1, 2 and (if the machine has them) 4 threads.
if want jobs; then
  cores=$(nproc)
  for j in 1 2 4; do
    [ "$j" -le "$cores" ] || [ "$j" -le 2 ] || continue
    tj=$(best "$X" run -q --jobs $j -p x86-64 -c "$D/fa64.toml" -c "$D/t95-single.toml" -p itanium2 -t "$D/real.xtr")
    [ "$j" = 1 ] && tj1=$tj
    printf "%-46s %10.3f %7.1f M refs/s over all designs (%.2fx --jobs 1; %s cores)\n" "4 designs, real, --jobs $j" "$tj" "$(echo "4 * $xr_refs / $tj / 1000000" | bc -l)" "$(echo "$tj1 / $tj" | bc -l)" "$cores"
  done
fi

# Constant memory: 10^9 references generated and piped (never on disk) through a curve over every
# size 1..4096 and through one FA-64 run; peak memory stays the footprint's whatever the length.
# Takes minutes; not in the default set (BENCH_LONG=1 or the `long` section).
if want long; then
  for cmd in "run -q -c $D/fa64.toml" "curve -q --entries 1..4096"; do
    "$X" gen --pattern zipf --refs 1000000000 --footprint 256M --seed 3 -o - |
      /usr/bin/time -f "xlat ${cmd%% *} over 10^9 refs: %e s wall, max RSS %M KB" "$X" $cmd -t - --format xtr
    "$X" gen --pattern zipf --refs 10000000 --footprint 256M --seed 3 -o - |
      /usr/bin/time -f "xlat ${cmd%% *} over 10^7 refs: %e s wall, max RSS %M KB" "$X" $cmd -t - --format xtr
  done
fi

# Several cores (docs/multicore.md): the time per reference of the FA-64 design on 8 simulated
# cores against 1 (the bound: at most 1.5x). The trace is BENCH_CORES_TRACE, a traced workload
# with several processes or threads (the suite's `xz-mt`, say), else the real trace. The two
# run in turns, BENCH_ROUNDS (default 5) times each, so that a change of the machine's load
# falls on both; each is given as its best and its median run, and the ratio of both.
if want cores; then
  ct=${BENCH_CORES_TRACE:-$D/real.xtr}
  { cat "$D/fa64.toml"; printf '[cores]\ncount = 8\n'; } | sed 's/^name = "fa64"/name = "fa64-8cores"/' > "$D/fa64-8cores.toml"
  read -r n _ < <(lookups "$ct")
  r1=() r8=()
  for _ in $(seq "${BENCH_ROUNDS:-5}"); do
    r1+=("$(secs "$X" run -q -j1 -c "$D/fa64.toml" -t "$ct")")
    r8+=("$(secs "$X" run -q -j1 -c "$D/fa64-8cores.toml" -t "$ct")")
  done
  median() { printf "%s\n" "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
  b1=$(least "${r1[@]}") m1=$(median "${r1[@]}") b8=$(least "${r8[@]}") m8=$(median "${r8[@]}")
  printf "%-46s %10.3f %7.1f M lookups/s (median %.3f s)\n" "FA-64, 1 core, $(basename "$ct")" "$b1" "$(echo "$n / $b1 / 1000000" | bc -l)" "$m1"
  printf "%-46s %10.3f %7.1f M lookups/s (median %.3f s; %.2fx the time of 1 core, best; %.2fx, median)\n" "FA-64, 8 cores" "$b8" "$(echo "$n / $b8 / 1000000" | bc -l)" "$m8" "$(echo "$b8 / $b1" | bc -l)" "$(echo "$m8 / $m1" | bc -l)"
fi
