#!/usr/bin/env bash
# The C++ blocks of the documents, cut out so that the build compiles them and the tests run or
# check them (tests/CMakeLists.txt runs this at configure time):
#
#   doc_blocks.sh OUT_DIR DOC...                     cut the blocks out; write OUT_DIR/blocks.txt
#   doc_blocks.sh --check-excerpts BLOCKS_TXT ROOT   check the excerpts against their sources
#
# Every ```cpp block of a document must follow, on the line just before it, a marker that says
# what it is:
#
#   <!-- cpp: program NAME -->       a whole program: OUT_DIR/NAME.cpp, built as NAME and run (its
#                                    output checked against tests/filecheck/NAME.txt if there is one)
#   <!-- cpp: fragment HARNESS -->   statements, compiled inside tests/docs/HARNESS.cpp, which
#                                    declares the names they use (OUT_DIR/DOC_LINE.inc)
#   <!-- cpp: excerpt PATH -->       lines that appear, one after another, in PATH (relative to the
#                                    source root): a program the tests build and run
#
# blocks.txt has a line "KIND NAME|HARNESS|PATH FILE DOC:LINE" per block. A block without a
# marker, or a program name used twice, is an error (exit 1) naming the document and line.
# Files are rewritten only when their text changes, so an unchanged block is not rebuilt.
set -euo pipefail

if [[ ${1:-} == --check-excerpts ]]; then
  blocks=$2 root=$3 status=0 checked=0
  while read -r kind path file where; do
    [[ $kind == excerpt ]] || continue
    checked=$((checked + 1))
    # Lines compare with their leading and trailing blanks trimmed; the block's lines must be
    # consecutive lines of the source.
    if ! awk -v block="$file" '
      function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
      BEGIN { while ((getline line < block) > 0) want[n++] = trim(line) }
      { src[m++] = trim($0) }
      END {
        for (s = 0; s + n <= m; s++) {
          for (i = 0; i < n && src[s + i] == want[i]; i++) {}
          if (i == n) exit 0
        }
        exit 1
      }' "$root/$path"; then
      echo "doc_blocks.sh: the excerpt at $where is not in $path (its lines, in order):" >&2
      sed 's/^/  /' "$file" >&2
      status=1
    fi
  done <"$blocks"
  echo "doc_blocks.sh: $checked excerpts checked"
  exit $status
fi

out=$1
shift
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for doc in "$@"; do
  base=$(basename "$doc" .md)
  awk -v doc="$doc" -v base="$base" -v tmp="$tmp" -v out="$out" '
    function fail(msg) { print doc ":" FNR ": " msg > "/dev/stderr"; failed = 1; exit 1 }
    inblock && /^```/ { inblock = 0; close(file); next }
    inblock { print > file; next }
    /^```cpp[ \t]*$/ {
      if (!kind)
        fail("a ```cpp block without a marker on the line before it (<!-- cpp: program NAME -->, " \
             "<!-- cpp: fragment HARNESS --> or <!-- cpp: excerpt PATH -->: tests/docs/doc_blocks.sh)")
      name = kind == "program" ? arg : base "_" (FNR + 1)
      ext = kind == "program" ? ".cpp" : kind == "fragment" ? ".inc" : ".excerpt"
      file = tmp "/" name ext
      # Compiler messages then name the document and its line.
      if (kind != "excerpt")
        printf "#line %d \"%s\"\n", FNR + 1, doc > file
      print kind, arg, out "/" name ext, doc ":" (FNR + 1) >> (tmp "/blocks.txt")
      inblock = 1; kind = ""
      next
    }
    match($0, /^<!-- cpp: (program|fragment|excerpt) [^ ]+ -->$/) {
      split($0, f, " "); kind = f[3]; arg = f[4]; next
    }
    /^<!-- cpp:/ { fail("a cpp marker that is not program NAME, fragment HARNESS or excerpt PATH") }
    { kind = "" }
    END { if (!failed && inblock) fail("a ```cpp block that does not end") }
  ' "$doc"
done
touch "$tmp/blocks.txt"
dups=$(awk '$1 == "program" { print $2 }' "$tmp/blocks.txt" | sort | uniq -d)
if [[ -n $dups ]]; then
  echo "doc_blocks.sh: program names used twice: $dups" >&2
  exit 1
fi
for f in "$tmp"/*; do
  cmp -s "$f" "$out/${f##*/}" || cp "$f" "$out/${f##*/}"
done
