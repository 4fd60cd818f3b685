#!/usr/bin/env bash
# `tessel export` without a GPU: exports registered schedules (one and several kernels, TMA maps,
# workspaces, several architectures), checks that each header includes nothing of tessel, LLVM or
# NVRTC, and compiles it with the host compiler into export_main.cpp plus a second translation
# unit that calls the fixed-arity NAME_launch / NAME_launch_with_workspace (and one that includes
# two headers), linked against the CUDA driver alone (its stub library) when one is given. An
# architecture a kernel cannot run on must be refused, naming it.
#
#   run.sh TESSEL CXX CUDA_INCLUDE_DIR LIBCUDA|"" WORK_DIR SOURCE_DIR
set -euo pipefail
tessel=$1 cxx=$2 cuda_include=$3 libcuda=$4 work=$5 src=$6
rm -rf "$work"
mkdir -p "$work"
flags=(-std=c++17 -O1 -Wall -Wextra -Wpedantic -Werror -I "$cuda_include")

# export_and_build NAME ARITY TESSEL_EXPORT_ARGS...: exports into $work/NAME and builds it.
export_and_build() {
  local name=$1 arity=$2
  shift 2
  local dir=$work/$name
  "$tessel" export "$@" --name "$name" -o "$dir"
  local header=$dir/$name.h
  test -s "$header"
  # Only <cuda.h> and the standard library.
  if grep '^#include' "$header" | grep -v -E '^#include <(cuda\.h|cstddef|cstdint|cstdio|mutex)>$'; then
    echo "FAIL: $header includes more than <cuda.h> and the standard library" >&2
    exit 1
  fi
  if grep -n -i -E 'tessel::|nvrtc|llvm' "$header" | grep -v '^[0-9]*://'; then
    echo "FAIL: $header uses tessel, NVRTC or LLVM outside its comments" >&2
    exit 1
  fi
  local params="" args="" i
  for ((i = 0; i < arity; ++i)); do
    params+="CUdeviceptr a$i, "
    args+="${args:+, }a$i"
  done
  cat >"$dir/call.cpp" <<CPP
#include "$name.h"
static_assert(${name}_num_args == $arity, "the header takes $arity arguments");
CUresult call_$name(${params}CUstream s) { return ${name}_launch($args, s); }
CUresult call_${name}_ws(${params}CUdeviceptr w, CUstream s) {
  return ${name}_launch_with_workspace($args, w, s);
}
CPP
  local sources=("$src/export_main.cpp" "$dir/call.cpp")
  local defs=(-I "$dir" "-DEXPORT_HEADER=\"$name.h\"" "-DEXPORT_NAME=$name")
  if [[ -n "$libcuda" ]]; then
    "$cxx" "${flags[@]}" "${defs[@]}" "${sources[@]}" -o "$dir/export_main" "$libcuda"
    # Linked against the driver alone: no NVRTC, LLVM or tessel library.
    if readelf -d "$dir/export_main" | grep NEEDED | grep -i -E 'nvrtc|llvm|tessel'; then
      echo "FAIL: $dir/export_main needs more than the CUDA driver" >&2
      exit 1
    fi
    readelf -d "$dir/export_main" | grep -q 'NEEDED.*libcuda\.so'
  else
    for s in "${sources[@]}"; do
      "$cxx" "${flags[@]}" "${defs[@]}" -c "$s" -o "$dir/$(basename "$s").o"
    done
  fi
  echo "ok: $name"
}

export TESSEL_CACHE_DIR=off TESSEL_TUNING_DB=off TESSEL_PRINT_AFTER=
export_and_build gemm_naive 3 gemm_naive --shape M=64,N=48,K=32 --dtype float32 --arch sm_80
export_and_build gemm_wmma 3 gemm_wmma --shape M=128,N=128,K=64 --arch sm_80,sm_90
# TMA maps, three kernels (a padded copy of A, 16 rows to a block of 64, as PAD=1 asks; split-K
# partial sums; their sum) and two workspaces.
export_and_build gemm_wgmma_splitk 3 gemm_wgmma --shape M=16,N=512,K=1024,PAD=1 --arch sm_90,sm_90a
test "$(ls "$work/gemm_wgmma_splitk"/*.cubin)" = "$work/gemm_wgmma_splitk/gemm_wgmma_splitk.sm_90a.cubin"
grep -q 'cuTensorMapEncodeTiled' "$work/gemm_wgmma_splitk/gemm_wgmma_splitk.h"
grep -q 'inline constexpr size_t gemm_wgmma_splitk_workspace_bytes = 196608;' \
  "$work/gemm_wgmma_splitk/gemm_wgmma_splitk.h"
# An im2col tensor map.
export_and_build conv2d_wgmma 3 conv2d_wgmma --shape N=2,H=8,W=8,C=64,K=64 --arch sm_90a
grep -q 'true, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4' "$work/conv2d_wgmma/conv2d_wgmma.h"

# Two headers in one translation unit.
printf '#include "gemm_wmma.h"\n#include "gemm_wgmma_splitk.h"\nint main() { return gemm_wmma_num_args - gemm_wgmma_splitk_num_args; }\n' \
  >"$work/both.cpp"
"$cxx" "${flags[@]}" -I "$work/gemm_wmma" -I "$work/gemm_wgmma_splitk" -c "$work/both.cpp" -o "$work/both.o"

# wgmma cannot run on sm_80: refused, naming the architecture; nothing written.
if "$tessel" export gemm_wgmma --shape M=128,N=128,K=128 --arch sm_80 -o "$work/refused" \
  2>"$work/refused.txt"; then
  echo "FAIL: gemm_wgmma exported for sm_80" >&2
  exit 1
fi
grep -q 'export for sm_80: .*wgmma' "$work/refused.txt"
test ! -e "$work/refused"
if "$tessel" export gemm_naive --arch sm80 -o "$work/refused" 2>"$work/refused.txt"; then
  echo "FAIL: --arch sm80 accepted" >&2
  exit 1
fi
grep -q "'sm80' is not an architecture" "$work/refused.txt"
echo "ok: refusals"
