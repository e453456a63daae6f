#!/usr/bin/env bash
# Compile-identity of the simulator's structural rewrites (issue 39, 39d), on the device.
#
# Input: a folder written by `benchmarks/sim_rewrite_evidence.py --prepare DIR` (one folder per
# case: canon.cu, variant.cu and the prompt's arch flag). Each source is compiled with the
# prompt's flags to a cubin and disassembled with cuobjdump; a case is identical when the
# two SASS listings are (the kernels' names are the same by construction). Output:
# $OUT/sass.csv with `id,identical,nvcc` (identical 1/0; a case whose canonical source does
# not build is left out: no evidence either way). Read back with
# `python benchmarks/sim_rewrite_evidence.py --collect DIR $OUT/sass.csv`.
#
#   bash benchmarks/device/sim_structure_sass.sh .rewrites "$OUT"
set -euo pipefail
DIR=${1:?prepared folder}
OUT=${2:?output folder}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
NVCC_V=$(nvcc --version | sed -n 's/.*release [0-9.]*, \(V[0-9.]*\).*/nvcc \1/p')
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo "$(dirname "$(command -v nvcc)")/cuobjdump")}
[ -x "$CUOBJDUMP" ] || { echo "no cuobjdump (set CUOBJDUMP)" >&2; exit 2; }
export NVCC_V CUOBJDUMP

one() {
  set -o pipefail
  local d=$1 id flag tmp
  id=$(basename "$d")
  flag=$(cat "$d/flag")
  tmp=$(mktemp -d)
  for f in canon variant; do
    # the same file name for both: nothing of the path reaches the code
    mkdir -p "$tmp/$f" && cp "$d/$f.cu" "$tmp/$f/candidate.cu"
    if ! nvcc -O3 -std=c++17 -arch="$flag" -cubin "$tmp/$f/candidate.cu" -o "$tmp/$f/k.cubin" \
        2>"$tmp/$f/err"; then
      [ "$f" = canon ] && { rm -rf "$tmp"; return 0; }
      echo "$id,0,$NVCC_V"; rm -rf "$tmp"; return 0
    fi
    # internal and anonymous-namespace names carry a hash of the file: names, not code
    "$CUOBJDUMP" -sass "$tmp/$f/k.cubin" | grep -v -e '^\s*$' -e 'Fatbin' -e 'code for' \
      | sed -E 's/(_INTERNAL_|_GLOBAL__N__)[0-9a-f]{8}_/\1/g' > "$tmp/$f/sass" \
      || { echo "cuobjdump failed on $id" >&2; rm -rf "$tmp"; return 0; }
    [ -s "$tmp/$f/sass" ] || { echo "empty SASS for $id" >&2; rm -rf "$tmp"; return 0; }
  done
  if cmp -s "$tmp/canon/sass" "$tmp/variant/sass"; then echo "$id,1,$NVCC_V"; else echo "$id,0,$NVCC_V"; fi
  rm -rf "$tmp"
}
export -f one

find "$DIR/cases" -mindepth 1 -maxdepth 1 -type d | sort \
  | xargs -P "$JOBS" -I{} bash -c 'one "$@"' _ {} > "$OUT/sass.csv"
echo "$(wc -l < "$OUT/sass.csv") cases, $(grep -c ',1,' "$OUT/sass.csv" || true) identical"
