#!/usr/bin/env bash
# Writes that fail are errors of the command (exit 1, a message naming the file), never LLVM's
# abort ("IO failure on output stream", exit 134): standard output on a full device, -o into
# one, -o - (the cubin on standard output, the report on standard error).
#   write_errors.sh TESSEL WORK_DIR
set -uo pipefail
tessel=$1 work=$2
rm -rf "$work" && mkdir -p "$work" || exit 1
export TESSEL_CACHE_DIR=off TESSEL_TUNING_DB=off TESSEL_PRINT_AFTER=
fail() { echo "FAIL: $*" >&2; exit 1; }
compile=(compile gemm_naive --shape M=64,N=64,K=64 --arch sm_90)

"$tessel" lower gemm_naive >/dev/full 2>"$work/lower.err"
rc=$?
[[ $rc == 1 ]] || fail "lower into /dev/full exited $rc, expected 1: $(cat "$work/lower.err")"
grep -q "tessel: error: writing to standard output failed: No space left on device" "$work/lower.err" ||
  fail "lower into /dev/full: $(cat "$work/lower.err")"

"$tessel" "${compile[@]}" -o /dev/full >"$work/full.out" 2>&1
rc=$?
[[ $rc == 1 ]] || fail "compile -o /dev/full exited $rc, expected 1: $(cat "$work/full.out")"
grep -q "tessel: error: compile: writing '/dev/full' failed: No space left on device" "$work/full.out" ||
  fail "compile -o /dev/full: $(cat "$work/full.out")"

"$tessel" "${compile[@]}" -o "$work/a.cubin" >"$work/file.out" || fail "compile -o FILE"
"$tessel" "${compile[@]}" -o - >"$work/b.cubin" 2>"$work/stdout.err" || fail "compile -o -"
cmp -s "$work/a.cubin" "$work/b.cubin" || fail "compile -o - wrote other bytes than -o FILE"
grep -q "kernel gemm_naive: .* registers" "$work/stdout.err" || fail "compile -o -: no report on stderr"
ls "$work" | grep -q '\.tmp$' && fail "a temporary was left behind: $(ls "$work")"
echo "ok: write errors"
