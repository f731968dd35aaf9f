#!/usr/bin/env bash
# Rebuilds the bundled traces in data/ from a real program:
#   data/sort-400.lackey.zst  valgrind lackey trace of `sort` on 400 generated lines (test fixture)
#   data/demo.xtr             the same trace in xlat's own format (what `xlat demo` runs)
# Needs valgrind (Debian package `valgrind`), zstd, awk and a built xlat (cargo builds it).
# The input is generated with a fixed seed; the trace itself depends on the exact sort, libc
# and valgrind builds, so a rebuild on another system gives a similar, not identical, trace.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is missing: apt-get install valgrind" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
awk 'BEGIN { srand(42); for (i = 0; i < 400; i++) { s = ""; for (j = 0; j < 8; j++) s = s sprintf("%c", 97 + int(rand() * 26)); print s, int(rand() * 100000) } }' > "$work/input.txt"
( cd "$work" && LC_ALL=C valgrind --tool=lackey --trace-mem=yes --log-file="$work/trace.%p" sort input.txt > /dev/null )
raw=$(ls "$work"/trace.*)
zstd -q -19 -f "$raw" -o data/sort-400.lackey.zst
# The xlat binary embeds data/demo.xtr; an empty placeholder lets it build the first time.
[ -f data/demo.xtr ] || : > data/demo.xtr
cargo run --release -q -p xlat-cli -- convert data/sort-400.lackey.zst data/demo.xtr
cargo run --release -q -p xlat-cli -- info data/demo.xtr
