# Sourced by scripts/decode-ncu.sh, prefill-ncu.sh and narrow-ncu.sh (not run on its own): the
# Nsight Compute metrics of a warp-stall profile, `ncu_stall_metrics EXTRA`, which prints
# `--metrics EXTRA,<issued-instruction latency by stall reason, every reason ncu 2025 names>`.
ncu_stall_metrics() {
  local m="--metrics $1" r
  for r in long_scoreboard barrier short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle \
      not_selected selected dispatch_stall no_instruction tex_throttle membar drain imc_miss \
      branch_resolving sleeping; do
    m="$m,smsp__average_warp_latency_issue_stalled_$r"
  done
  echo "$m"
}
