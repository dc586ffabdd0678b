#!/usr/bin/env bash
# One launch's Nsight Compute source page, on the GPU machine (issue 30's profiles): the
# full set of one launch of the kernels matching REGEX after SKIP others, saved as a report,
# then its SASS source page (per-instruction executed counts, stall samples, shared and L1
# wavefronts) as $OUT/NAME-sass.csv.gz and its details page as $OUT/NAME-details.txt.
# scripts/ncu-source-mix.py reads the CSV anywhere (no GPU needed). What it proves: which
# instructions a launch's issue slots, waits and memory wavefronts went to. Earlier receipts
# (rows-output/, launch-chain/, attention-decode/) spelled these three commands inline.
#   OUT=DIR scripts/ncu-source.sh NAME REGEX SKIP BIN ARGS...     [NCU=path to ncu]
set -u
OUT=${OUT:?OUT: where the results go}
[ $# -ge 4 ] || { echo "usage: OUT=DIR $0 NAME REGEX SKIP BIN ARGS..." >&2; exit 2; }
name=$1 regex=$2 skip=$3 bin=$4
shift 4
case $skip in '' | *[!0-9]*) echo "ncu-source: SKIP '$skip' is not a count" >&2; exit 2 ;; esac
[ -x "$bin" ] || { echo "ncu-source: $bin is not an executable" >&2; exit 2; }
NCU=${NCU:-/usr/local/cuda/bin/ncu}
[ -x "$NCU" ] || { echo "ncu-source: no Nsight Compute at $NCU (set NCU)" >&2; exit 2; }
mkdir -p "$OUT"
timeout 100 "$NCU" --set full --import-source no -k regex:"$regex" --launch-skip "$skip" --launch-count 1 \
  -o /tmp/"$name" -f "$bin" "$@" > /tmp/"$name".log 2>&1
echo "$name ncu exit $?"; tail -2 /tmp/"$name".log
"$NCU" -i /tmp/"$name".ncu-rep --page source --csv --print-source sass | gzip > "$OUT/$name-sass.csv.gz"
"$NCU" -i /tmp/"$name".ncu-rep --page details > "$OUT/$name-details.txt" 2>&1
