#!/usr/bin/env bash
# Runs a command and checks its output with FileCheck:
#   run.sh EXPECTED_EXIT_CODE FILECHECK CHECK_FILE [FILECHECK_OPTION...] -- COMMAND [ARG...]
# With an expected exit code of 0 only stdout is checked (stderr still reaches the test log);
# otherwise stdout and stderr together, since that is where error messages go. A command that
# exits with another code fails the test even when its output would match, which a plain
# `cmd | FileCheck` pipe would not notice.
expected=$1
shift
filecheck=()
while [[ $# -gt 0 && $1 != -- ]]; do
  filecheck+=("$1")
  shift
done
if [[ $# -eq 0 || ${#filecheck[@]} -lt 2 ]]; then
  echo "usage: run.sh EXPECTED_EXIT_CODE FILECHECK CHECK_FILE [OPTION...] -- COMMAND [ARG...]" >&2
  exit 2
fi
shift
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
if [[ $expected == 0 ]]; then
  "$@" >"$out"
else
  "$@" >"$out" 2>&1
fi
rc=$?
if [[ $rc != "$expected" ]]; then
  echo "run.sh: '$*' exited with $rc, expected $expected; its output ends with:" >&2
  tail -n 40 "$out" >&2
  exit 1
fi
"${filecheck[@]}" --input-file="$out"
