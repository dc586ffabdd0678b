#!/usr/bin/env bash
mkdir -p /tmp/bin; cp .stage/bin/N /tmp/bin/N; chmod +x /tmp/bin/N; nvidia-smi -L; bash .stage/calls/part.sh
