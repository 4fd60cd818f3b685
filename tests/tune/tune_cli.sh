#!/usr/bin/env bash
# `tessel tune` from the command line, in CPU-executor mode (no GPU): it writes a database,
# resumes from it, `tessel interpret` picks the best record (TESSEL_LOG_LEVEL=info says so), and
# under `mpirun -np 2` (when tessel was built with MPI and mpirun is installed) the two ranks
# split the candidates and rank 0 merges their records.
#   tune_cli.sh TESSEL FILECHECK CHECK_FILE MPIEXEC|"" 
set -uo pipefail
tessel=$1 filecheck=$2 checks=$3 mpiexec=${4:-}
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
export TESSEL_CACHE_DIR=off TESSEL_PRINT_AFTER= TESSEL_LOG_LEVEL=
shape=M=64,N=128,K=64,P=0,PP=0,CL=0 # the kernel's form fixed: the grid over the tiles
fail() { echo "tune_cli.sh: $*" >&2; exit 1; }
check() { # PREFIX FILE
  "$filecheck" "$checks" --check-prefix="$1" --input-file="$2" || fail "output of $1 did not match"
}

"$tessel" tune gemm_wgmma --shape $shape --cpu --trials 6 --db "$dir/db.jsonl" >"$dir/first" 2>&1 ||
  { cat "$dir/first"; fail "first tune exited $?"; }
check FIRST "$dir/first"
[[ $(wc -l <"$dir/db.jsonl") == 6 ]] || fail "expected 6 records after the first run"

"$tessel" tune gemm_wgmma --shape $shape --cpu --trials 6 --db "$dir/db.jsonl" >"$dir/again" 2>&1 ||
  fail "second tune exited $?"
check AGAIN "$dir/again"
[[ $(wc -l <"$dir/db.jsonl") == 6 ]] || fail "the resumed run must add nothing"

TESSEL_TUNING_DB="$dir/db.jsonl" TESSEL_LOG_LEVEL=info \
  "$tessel" interpret gemm_wgmma --shape $shape >"$dir/use" 2>&1 || { cat "$dir/use"; fail "interpret failed"; }
check USE "$dir/use"

if [[ -z $mpiexec ]]; then
  echo "tune_cli.sh: no mpiexec: the MPI part is not run (install openmpi-bin libopenmpi-dev)"
  exit 0
fi
# Open MPI's own allocations outlive MPI_Finalize (many, in components it has unloaded, so no
# suppression can name them): under ASan the ranks run without leak checks. The same search runs
# with them above, in one process.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
mpi_flags=(--oversubscribe)
((EUID == 0)) && mpi_flags+=(--allow-run-as-root)
"$mpiexec" "${mpi_flags[@]}" -np 2 "$tessel" tune gemm_wgmma --shape $shape --cpu --trials 6 \
  --db "$dir/mpi.jsonl" >"$dir/mpi" 2>&1 || { cat "$dir/mpi"; fail "mpirun tune exited $?"; }
check MPI "$dir/mpi"
[[ $(wc -l <"$dir/mpi.jsonl") == 6 ]] || fail "expected the 6 records of both ranks in the database"
"$mpiexec" "${mpi_flags[@]}" -np 2 "$tessel" tune gemm_wgmma --shape $shape --cpu --trials 6 \
  --db "$dir/mpi.jsonl" >"$dir/mpi2" 2>&1 || fail "second mpirun tune exited $?"
check MPI2 "$dir/mpi2"
echo "tune_cli.sh: ok"
