"""Layer 7, studies: the studies behind the experiment scripts, as
library functions.

Each module is one study: a frozen `Settings` dataclass (the flags that
change the answer, in the units of the flag names) and
`run(settings, progress=None) -> (result, metrics)`, which does no file
I/O and prints nothing (phases over a few seconds are reported through
`progress`, a callable taking one line of text). `result` is the dict an
`experiments/<study>.py` launcher writes to result.json, `metrics` the
rows of metrics.jsonl. The launchers parse flags, call `run`, write the
run directory, the CSV of the main table and the plots, and print.
Nothing else in `codesign` imports this package except `codesign.api`.

`table(result)` gives the printed table and `csv_table(result)` the
(header, rows) of its main table (`<study>.csv`, units in the column
names). A module's `EXTRA_KEYS` name keys of `result` that the launcher
leaves out of result.json (wall seconds; reasons and short names the
table and plots print), so that result.json stays reproducible.

  proposal           the platform to build under a budget (propose)
  compare_platforms  which platform trains best as the tables grow
  scale_out          NIC bandwidth that keeps scale-out efficient
  sensitivity        what to upgrade next: elasticities of every field
  pareto             throughput frontier against capex and power
  growth             design for the model grown x2-x8, regrets per factor
  search_quality     gradient search against random, CMA-ES, exhaustive
  zion_decision      the Zion paper's decision: 2019's parts and today's
  calibration        the model against this device's train steps and C1-C19
  benchmark          how fast the cost model evaluates
  shared             what they share: loading, checks, names, reasons
  training_time      scale_out's efficiency reference and time to train
  batch_choice       the global batch as a decision of time_to_train
  sweeps             evaluation over a grid of designs, elasticities
  plotting           the figures the launchers draw

Imports: every layer below (core to boundary).
"""
