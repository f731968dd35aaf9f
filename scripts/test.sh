#!/usr/bin/env bash
# The test command: formatting, lints (warnings are errors) and every test of the workspace.
# Installs what the tests need on a fresh Debian machine first, so CI and a new machine agree.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the tests use, as command:package: valgrind (tests trace real programs with
# lackey), gzip (a program traced), zstd (scripts/make-demo-trace.sh), qemu-x86_64 from
# qemu-user and cc from gcc (`xlat trace` runs programs under QEMU with a plugin compiled on
# first use); and the programs of the small workload suite (workloads/manifest.toml): sqlite3,
# make, bzip2, xz from xz-utils and /usr/bin/python3 from python3-minimal; and the font PNG
# charts are drawn with (fonts-dejavu-core). Missing ones are installed.
need=()
for pair in valgrind:valgrind gzip:gzip zstd:zstd qemu-x86_64:qemu-user cc:gcc \
  sqlite3:sqlite3 make:make bzip2:bzip2 xz:xz-utils /usr/bin/python3:python3-minimal \
  /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf:fonts-dejavu-core; do
  [ -f "${pair%%:*}" ] || command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "missing ${need[*]}: install the Debian packages of the same names (as root: apt-get install ${need[*]})" >&2
    exit 2
  fi
fi
command -v cargo >/dev/null || { echo "cargo is missing: install Rust (rustup) first" >&2; exit 2; }
rustup component add rustfmt clippy >/dev/null 2>&1 || true

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked 2>&1 | tee "$log" || status=$?
# One closing line over every test binary (cargo prints one "test result" line per binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "all tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
