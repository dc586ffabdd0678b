#!/usr/bin/env bash
ls -la .stage/parts/ | tail -n +2 | awk '{print $5, $9}' | tr '\n' ' '; echo; tail -1 /tmp/lcb/build.log; cat /tmp/f0/synth.log 2>/dev/null
