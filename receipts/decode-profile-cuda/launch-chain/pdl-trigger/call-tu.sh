#!/usr/bin/env bash
# Step 22, probe 5b. Builds: O = 0e05443; TU = O with tu.patch (the late trigger in the
# unfused kernels only: B > 1 and the 8192-wide one-row launches).
# On the files whose eager takes the unfused kernels (the 8192-wide 70B slice), and B=8.
set -u
SAME="l70:auto l8q4k:auto" SPEED="l70 l8q4k" ROUNDS=2 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O TU=.stage/bin/TU
cat $OUT/same.txt; grep -v floor $OUT/speed.txt; rm -f $OUT/prefill.txt
