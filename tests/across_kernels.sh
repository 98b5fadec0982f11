#!/usr/bin/env bash
# The tests that read files made on another machine (pytest -m shipped), run under the kernels other CPUs
# would pick: torch's default (no vector ISA), AVX2 and AVX-512 code paths, and MKL restricted to AVX2.
# Float32 results differ in the last bits between these; the tests must hold under every one.
# Usage: tests/across_kernels.sh [extra pytest arguments]   (from the repository root, after `make`)
set -uo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
status=0
# A vector ISA this CPU lacks cannot be selected (torch dies on an illegal instruction): that setting is
# reported as not run, and the run still fails if every setting it could run did not pass.
cpu_has() { grep -qw "$1" /proc/cpuinfo 2>/dev/null; }
for setting in ATEN_CPU_CAPABILITY=default ATEN_CPU_CAPABILITY=avx2 ATEN_CPU_CAPABILITY=avx512 MKL_ENABLE_INSTRUCTIONS=AVX2; do
    echo "== $setting"
    case $setting in
        *=avx2) flag=avx2 ;;
        *=avx512) flag=avx512f ;;
        *) flag= ;;
    esac
    if [ -n "$flag" ] && ! cpu_has "$flag"; then
        echo "not run: this CPU has no $flag"
        continue
    fi
    # -rf lists each failing test by name; the last line counts them
    if ! env "$setting" "$python" -m pytest -q -rf -p no:cacheprovider -m shipped "$@" tests | grep -E "^FAILED|passed|failed|error"; then
        status=1
    fi
done
exit $status
