#!/usr/bin/env bash
# The tests that read files made on another machine (pytest -m shipped), run under the kernels other CPUs
# would pick: torch's default (no vector ISA), AVX2 and AVX-512 code paths, and MKL restricted to AVX2.
# Float32 results differ in the last bits between these; the tests must hold under every one.
# Usage: tests/across_kernels.sh [extra pytest arguments]   (from the repository root, after `make`)
set -uo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
status=0
for setting in ATEN_CPU_CAPABILITY=default ATEN_CPU_CAPABILITY=avx2 ATEN_CPU_CAPABILITY=avx512 MKL_ENABLE_INSTRUCTIONS=AVX2; do
    echo "== $setting"
    # -rf lists each failing test by name; the last line counts them
    if ! env "$setting" "$python" -m pytest -q -rf -p no:cacheprovider -m shipped "$@" tests | grep -E "^FAILED|passed|failed|error"; then
        status=1
    fi
done
exit $status
