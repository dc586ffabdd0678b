#!/usr/bin/env bash
# One call's A/B of a prefill step on the GPU machine (one H100 or H200), the form
# receipts/prefill-cuda/{xs-groups,k-tiles}/call*.sh spelled out each time: the base build
# .stage/bin/M against .stage/bin/NAME (from a receipt's build.sh). Proves, through
# receipts/prefill-cuda/folded-scales/call1.sh with BUILDS="M NAME..." and G = the last name:
# the same bits as M at prime chunks 512 and 37 and on every arm and serve at N = 2
# (same.txt); prefill512 of the builds alternating (prefill.txt); microseconds a wgmma
# launch (prof.txt); G's gates at N = 1..8 with chunks 512 and 37, the planted fault, a soak
# until DEADLINE (gates.txt, soak.txt); chunks 64 and 37 (chunks.txt, scripts/prefill-chunks.sh);
# then, with PROFILE="NAME:REGEX:SKIP", Nsight Compute's full set and source page of one launch
# of the kernels matching REGEX after SKIP others, per build (scripts/ncu-source.sh: NAME-BUILD-
# details.txt, NAME-BUILD-sass.csv.gz). Everything in one tarball, $OUT/ab.tgz, written again
# after each part (a call cut short keeps what finished).
#   OUT=DIR scripts/prefill-ab.sh NAME [NAME ...]    [DEADLINE=230; PROFILE=ar:attention_rows:2]
set -u
R=${OUT:?OUT: where the tarball goes}
[ $# -ge 1 ] || { echo "usage: OUT=DIR $0 NAME [NAME ...]" >&2; exit 2; }
set -- M "$@"
for n in "$@"; do [ -x .stage/bin/"$n" ] || { echo "prefill-ab: .stage/bin/$n is not a build" >&2; exit 2; }; done
O=/tmp/prefill-ab; rm -rf $O; mkdir -p $O
keep() { tar czf "$R/ab.tgz" -C $O .; }
G=${!#}
DEADLINE=${DEADLINE:-230} BUILDS="$*" G=$G OUT=$O bash receipts/prefill-cuda/folded-scales/call1.sh > $O/call1.out 2>&1
rm -f $O/speed.txt $O/llama-build-tail.txt
keep
scripts/prefill-chunks.sh "$@" > $O/chunks.txt 2>&1
keep
if [ -n "${PROFILE:-}" ]; then
  # Not NCU: scripts/ncu-source.sh reads NCU as the path to Nsight Compute.
  IFS=: read -r name regex skip <<< "$PROFILE"
  RUN="bench --backend cuda --model /tmp/ab/l8q4k.gguf --graphs off --arms prime --chunk 512 --prompt-len 512"
  for n in "$@"; do OUT=$O scripts/ncu-source.sh "$name-$n" "$regex" "$skip" .stage/bin/"$n" $RUN; keep; done
fi
cat $O/prefill.txt $O/same.txt $O/gates.txt $O/chunks.txt; tail -2 $O/soak.txt
