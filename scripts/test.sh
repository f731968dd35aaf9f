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
# charts are drawn with (fonts-dejavu-core); for the Python package's tests, python3 with venv
# (python3-venv) and unshare (util-linux) and ip (iproute2), which give the Ray test's cluster
# network and process namespaces of its own. Missing ones are installed.
need=()
for pair in valgrind:valgrind gzip:gzip zstd:zstd qemu-x86_64:qemu-user cc:gcc \
  sqlite3:sqlite3 make:make bzip2:bzip2 xz:xz-utils /usr/bin/python3:python3-minimal \
  /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf:fonts-dejavu-core unshare:util-linux ip:iproute2; do
  [ -f "${pair%%:*}" ] || command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
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

# The Python package (bindings/python): a virtual environment kept in target/py-venv (made again
# when requirements-test.txt changes), the package built into it by maturin with the workspace's
# target directory (shared dependencies build once), then its pytest suite, which compares with
# the `xlat` command cargo test built.
venv=target/py-venv
req=bindings/python/requirements-test.txt
if ! cmp -s "$req" "$venv/requirements-test.txt" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
  cp "$req" "$venv/requirements-test.txt"
fi
(
  # Each step says when it fails: `set -e` does not reach into a subshell tested by `||`.
  export VIRTUAL_ENV="$PWD/$venv" PATH="$PWD/$venv/bin:$PATH" CARGO_TARGET_DIR="$PWD/target"
  maturin develop --locked --quiet -m bindings/python/Cargo.toml || exit
  cd bindings/python || exit
  cargo fmt --check || exit
  cargo clippy --locked --all-targets --quiet -- -D warnings || exit
  XLAT_BIN="$PWD/../../target/debug/xlat" python -m pytest -p no:cacheprovider tests
) 2>&1 | tee -a "$log" || status=$?

# One closing line over every test binary (cargo prints one "test result" line per binary) and
# the pytest suite (its last line: "N passed, M failed, ... in S s").
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     /^=+ .* in [0-9.]+s/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^(failed|errors?)/) f += $i } }
     END { printf "all tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
