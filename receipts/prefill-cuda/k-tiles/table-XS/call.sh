#!/usr/bin/env bash
# BENCH.md's synthetic table with main's build after steps 55 and 56 (48713a7), beside
# llama.cpp built in the same call, twice on one H100 (2026-12-07; call1/ and call2/, each
# summary.txt, vs-llamacpp.json, log.txt). Proves each row's eager, B=8 and prefill512 ratio
# on that card after steps 55 and 56. As run (the build, here: cargo build --release;
# strip -o .stage/bin/H target/release/ppn-gate; .stage/llama.cpp.tgz the anchors tarball):
#   BIN=.stage/bin/H OUT=DIR bash receipts/prefill-cuda/two-in-flight/call2.sh   (.stage carried)
set -u
OUT=${OUT:?}
BIN=${BIN:-.stage/bin/H} exec bash "$(dirname "$0")"/../../two-in-flight/call2.sh
