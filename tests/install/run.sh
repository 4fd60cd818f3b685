#!/usr/bin/env bash
# install.downstream: `cmake --install` of the already-built tree into a fresh prefix, then
# examples/downstream configured against that prefix alone (find_package(tessel CONFIG)), built
# and run: it must print the lowered IR, the CUDA kernel and the size of NVRTC's sm_80 cubin.
# Also: the installed package must not name the source or build tree, the headers are installed
# without sources, and the installed `tessel` program starts.
#
#   run.sh CMAKE BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR MAKE_PROGRAM CC CXX LLVM_DIR CUDA_ROOT
set -euo pipefail
cmake=$1 build=$2 src=$3 work=$4 generator=$5 make_program=$6 cc=$7 cxx=$8 llvm_dir=$9
cuda_root=${10}
prefix=$work/prefix
rm -rf "$work"
mkdir -p "$work"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

echo "== cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log"
  fail "cmake --install failed"
}
libdir=$(dirname "$(find "$prefix" -name libtessel.a -print -quit)")
[[ -f $libdir/libtessel.a ]] || fail "no libtessel.a under $prefix"
[[ -f $libdir/cmake/tessel/tesselConfig.cmake ]] || fail "no tesselConfig.cmake in $libdir/cmake/tessel"
for h in tessel/tessel.h tessel/compiler/tessel.h tessel/compiler/ir/IRNodes.def \
         tessel/runtime/Nvrtc.h tessel/runtime/interp/Executor.h tessel/schedules/Registry.h \
         tessel/compiler/codegen/CodeGenCUDA.h; do
  [[ -f $prefix/include/$h ]] || fail "$prefix/include/$h was not installed"
done
if find "$prefix/include" -name '*.cpp' | grep .; then
  fail "sources installed with the headers"
fi
# Relocatable: nothing installed for CMake or the compiler names this checkout.
if grep -rlF "$src" "$libdir/cmake" "$prefix/include"; then
  fail "the installed package names the source tree $src (above)"
fi
"$prefix/bin/tessel" list >"$work/tessel_list.txt" || fail "the installed tessel program failed"
grep -q '^gemm_tc' "$work/tessel_list.txt" || fail "installed 'tessel list' does not list gemm_tc"

echo "== configure examples/downstream against $prefix"
# The same compilers, LLVM and CUDA toolkit as the tree; no build type: the quickest compile.
"$cmake" -S "$src/examples/downstream" -B "$work/build" -G "$generator" \
  -DCMAKE_MAKE_PROGRAM="$make_program" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_PREFIX_PATH="$prefix" -DLLVM_DIR="$llvm_dir" -DCUDAToolkit_ROOT="$cuda_root" \
  >"$work/configure.log" 2>&1 || {
  cat "$work/configure.log"
  fail "configuring examples/downstream failed"
}
grep -F "tessel 0." "$work/configure.log" || true
grep -qF "from $libdir/cmake/tessel" "$work/configure.log" ||
  fail "examples/downstream did not find tessel in $prefix (configure.log above)"

echo "== build examples/downstream"
"$cmake" --build "$work/build" >"$work/build.log" 2>&1 || {
  cat "$work/build.log"
  fail "building examples/downstream failed"
}

echo "== run tessel_downstream"
rc=0
"$work/build/tessel_downstream" >"$work/out.txt" 2>&1 || rc=$?
if ((rc != 0)); then
  cat "$work/out.txt"
  fail "tessel_downstream exited with $rc"
fi
for pattern in '^// ---- lowered ----$' 'extern "C" __global__ .*downstream_gemm' \
               '^cubin for sm_80: [0-9]+ bytes$' '^kernel downstream_gemm'; do
  grep -qE "$pattern" "$work/out.txt" || {
    cat "$work/out.txt"
    fail "no line matching '$pattern' in tessel_downstream's output"
  }
done
grep -E '^(cubin for|kernel [A-Za-z0-9_]+:)' "$work/out.txt"
echo "PASS"
