"""Layer 5, calibration: how the model is grounded in measurements.

  dlrm             a small Flax DLRM built from a workload
  synthetic_data   batches for it, with the workload's skew
  microbenchmarks  GEMM, memory and embedding timings of this device
  device_profile   a device's fitted numbers as a platform overlay
  profile_fit      the fit of a device profile to microbenchmarks
  count_checks     analytic counts against XLA's cost analysis
  public_cases     the published cases (data/calibration_cases.json)
                   and the leave-one-case-out fit of the stack numbers

Imports: core, spec, model, search.
"""
