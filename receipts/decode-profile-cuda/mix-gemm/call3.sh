#!/usr/bin/env bash
# Issue 30 step 32, call 3 (right after call 2, the same session): the deep 70B-shaped row
# (llama70b-l21-q4_k: 21 layers of the 70B shape, 10.4 GB of Q4_K) beside llama.cpp with M,
# in a call of its own (its synthesis takes ~2 minutes; llama.cpp built again in this call:
# call 2's build was not found under /tmp/bench-vs-llamacpp, LLAMA_BIN empty).
# deep/vs-llamacpp.json, deep/summary.txt, deep/log.txt. Proves where the deep row stands
# after steps 30 to 32. Run as given to the device tool (one command line), .stage carried:
L=$(ls -d /tmp/bench-vs-llamacpp/*/build/bin 2>/dev/null | head -1); echo "LLAMA_BIN=$L"; nvidia-smi -L; if [ -n "$L" ]; then export LLAMA_BIN=$L; fi; ROWS=llama70b-l21-q4_k PREFILL_ROWS= SERVE_ROWS= RECEIPTS= DEADLINE_S=560 scripts/bench-vs-llamacpp.sh .stage/bin/M .stage/llama.cpp.tgz $OUT/deep > $OUT/deep.out 2>&1; echo "bench exit $?"; rm -f $OUT/deep/raw.tar.gz; cat $OUT/deep/summary.txt; tail -3 $OUT/deep.out
