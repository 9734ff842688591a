#!/usr/bin/env bash
# ASan + UBSan over the CPU suite: the C core and the extension built with GLTENSOR_SANITIZE=address,undefined
# (CPU backend only), in a copy of the tree so the tree's own build stays as it is, then pytest with libasan
# preloaded (Python itself is not instrumented) and leak detection on. Leaks owned by CPython, Mesa, glvnd,
# dlopen, ctypes or NumPy are suppressed (tools/sanitizers/lsan.supp says why); any other report fails the run.
#   tools/ci_sanitize.sh [PYTEST ARGS...]     (default: the whole suite)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/gltensor-sanitize.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar --exclude=./build --exclude=./.venv --exclude='*.so' --exclude=./.git -cf - . | tar -C "$work" -xf -
# The Python `make test` ran with (the bootstrap's choice, tools/python.sh: the clone's .venv unless PYTHON is given
# or an environment is active), where the suite's packages are; the real interpreter, not a shell shim under the
# preload.
py=$("$root/tools/python.sh" -c "import sys; print(sys.executable)")
start=$(date +%s)
(cd "$work" && GLTENSOR_NO_CUDA=1 GLTENSOR_SANITIZE=address,undefined "$py" setup.py -q build_ext --inplace) \
    > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
echo "sanitize: built with -fsanitize=address,undefined in $(( $(date +%s) - start )) s"
libasan=$(${CC:-gcc} -print-file-name=libasan.so)
[ -e "$libasan" ] || { echo "sanitize: libasan.so not found (apt-get install libasan8 or gcc)"; exit 1; }
# libstdc++ is preloaded too: ASan resolves __cxa_throw when it starts, and torch (loaded later) throws C++
# exceptions through it ("CHECK failed: real___cxa_throw != 0" otherwise).
libstdcxx=$(${CXX:-g++} -print-file-name=libstdc++.so.6 2>/dev/null || true)
[ -e "$libstdcxx" ] && libasan="$libasan $libstdcxx"
# detect_leaks: the leak check runs at exit of every process (pytest and the subprocesses tests start);
# exitcode 86 tells a sanitizer report apart from a test failure.
# Reports go to files (log_path): pytest captures stderr, and a process that ASan stops never prints it.
mkdir -p "$work/reports"
export ASAN_OPTIONS="detect_leaks=1:exitcode=86:halt_on_error=1:abort_on_error=0:allocator_may_return_null=1:detect_odr_violation=0:log_path=$work/reports/asan:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/tools/sanitizers/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87:log_path=$work/reports/ubsan:${UBSAN_OPTIONS:-}"
# Tests whose memory or timing bounds the sanitizer distorts (quarantine, shadow memory) skip themselves.
export GLTENSOR_UNDER_SANITIZER=1
export PYTHONPATH="$work/python${PYTHONPATH:+:$PYTHONPATH}"
LD_PRELOAD="$libasan" ASAN_OPTIONS=detect_leaks=0 "$py" -c "import gltensor, sys; assert gltensor.__file__.startswith('$work'), gltensor.__file__"
# Left out: the tests that compile and run C programs with the system compiler (the C example links its own,
# unsanitized libgltensor).
set +e
# -v names each test before it runs: a process stopped by a report still shows which test it was in.
LD_PRELOAD="$libasan" "$py" -m pytest -v -rfE -p no:cacheprovider --ignore=tests/test_c_example.py \
    --ignore=tests/test_header.py "$@" > "$work/pytest.log" 2>&1 &
main=$!
wait $main
rc=$?
grep -E "^(FAILED|ERROR) " "$work/pytest.log" | head -30
# what a failure said (the work folder goes with this script): its last lines, so that a failure seen once in CI
# can be read afterwards
sed -n '/^=* \(FAILURES\|ERRORS\) =*$/,/^=* short test summary/p' "$work/pytest.log" | tail -n 80
tail -n 3 "$work/pytest.log"
set -e
reports=$(ls "$work/reports" | wc -l)
echo "sanitize: pytest exit $rc (86: ASan/LSan, 87: UBSan), sanitizer report files: $reports (pytest's own: *.$main)"
for f in $(ls "$work/reports" | head -3); do
    echo "---- $f"; grep -vE "^\s*$" "$work/reports/$f" | head -60
done
exit "$rc"
