#!/usr/bin/env bash
# Checks the IR excerpts of a document against the program that prints them:
#   check_doc.sh FILECHECK PROGRAM DOC
# Every ```text block that follows a line `<!-- check: NAME -->` in DOC must appear, line after
# line (FileCheck's CHECK then CHECK-NEXT), in the output of `PROGRAM NAME`.
filecheck=$1 program=$2 doc=$3
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
awk -v dir="$tmp" '
  /^<!-- check: [A-Za-z0-9_]+ -->$/ { n++; file = sprintf("%s/%03d.%s", dir, n, $3); want = 1; next }
  want && /^```/ {
    if (inblock) { want = 0; close(file) }
    inblock = !inblock; first = 1; next
  }
  inblock { print (first ? "CHECK: " : "CHECK-NEXT: ") $0 > file; first = 0 }
' "$doc"
checked=0 status=0
for check in "$tmp"/*.*; do
  [[ -e $check ]] || break
  name=${check##*.}
  if ! "$program" "$name" >"$tmp/out" 2>&1; then
    echo "check_doc.sh: '$program $name' failed:" >&2
    cat "$tmp/out" >&2
    status=1
    continue
  fi
  if ! "$filecheck" "$check" --input-file="$tmp/out"; then
    echo "check_doc.sh: the excerpt of example '$name' in $doc no longer matches" >&2
    status=1
  fi
  checked=$((checked + 1))
done
if [[ $checked -eq 0 ]]; then
  echo "check_doc.sh: no checked excerpts in $doc" >&2
  exit 1
fi
echo "check_doc.sh: $checked excerpts of $doc checked"
exit $status
