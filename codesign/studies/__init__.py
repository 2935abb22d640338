"""The studies behind the experiment scripts, as library functions.

Each module is one study: a frozen `Settings` dataclass (the flags that
change the answer, in the units of the flag names) and
`run(settings, progress=None) -> (result, metrics)`, which does no file
I/O and prints nothing (phases over a few seconds are reported through
`progress`, a callable taking one line of text). `result` is the dict an
`experiments/<study>.py` launcher writes to result.json, `metrics` the
rows of metrics.jsonl. The launchers parse flags, call `run`, write the
run directory, the CSV of the main table and the plots, and print.

  proposal     the platform to build under a budget (experiments.propose)
  calibration  the model against this device's real DLRM train steps and
               the published cases C1-C9 (experiments.calibrate)
  benchmark    how fast the cost model evaluates (experiments.benchmark)
"""
