#!/usr/bin/env bash
# Rebuilds the bundled traces of several threads and processes in data/, with xlat's own tracer:
#   data/churn.xtr     the suite's `churn` (workloads/src/churn.c): 4 threads of one process,
#                      each 64 times mapping, touching, discarding and unmapping a buffer
#   data/shmserve.xtr  the suite's `shmserve` (workloads/src/shmserve.c): a server and 3 forked
#                      clients, 24 requests each (mprotect, madvise, a MAP_SHARED area)
# The exact-count tests of several cores (crates/xlat/tests/models/engine/cores_ref.rs) run
# them against a reference model. Needs cc (Debian package gcc) and qemu-x86_64 (qemu-user);
# XLAT=path/to/xlat uses that binary instead of building one with cargo.
# The threads and processes run at once under QEMU and the tracer serializes them as they
# come, so each rebuild gives a similar, not identical, trace (other interleavings and counts).
set -euo pipefail
cd "$(dirname "$0")/.."
xlat() {
    if [ -n "${XLAT:-}" ]; then "$XLAT" "$@"; else cargo run --release -q -p xlat-cli -- "$@"; fi
}
churn=$(xlat workloads program churn)
shmserve=$(xlat workloads program shmserve)
xlat trace -q -o data/churn.xtr -- "$churn" 4 64 256 > /dev/null
xlat trace -q -o data/shmserve.xtr -- "$shmserve" 3 24 16 > /dev/null
xlat info data/churn.xtr
xlat info data/shmserve.xtr
