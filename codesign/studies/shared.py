"""What the sweep studies share: loading inputs given by name, the
sentences that explain an infeasible design, and plain CSV values."""

import numpy as np

from codesign import inputs
from codesign import plan as plan_lib
from codesign import stack as stack_lib
from codesign import workload as wl
from codesign.hardware import Platform

# Printed under every table with a "% of step" column: the cost model sums
# each component alone (`CostReport.breakdown`) and overlaps them after, so
# the shares of one step can add to more than 100%.
OVERLAP_NOTE = (
  '% of step: each component alone over the step time; components are '
  'summed before overlap, so the shares can add to more than 100%.'
)


def workload(x) -> wl.Workload:
  """A `Workload`, or a preset name / JSON file loaded without overrides."""
  return x if isinstance(x, wl.Workload) else inputs.load_workload(str(x))


def platform(x) -> Platform:
  """A `Platform`, or a preset name / JSON file loaded without overrides."""
  return x if isinstance(x, Platform) else inputs.load_platform(str(x))


def stack(x) -> stack_lib.Stack:
  """A `Stack`, or a preset name / JSON file loaded without overrides."""
  return x if isinstance(x, stack_lib.Stack) else inputs.load_stack(str(x))


def plan(x, w, p, s) -> plan_lib.Plan:
  """A `Plan`, or `auto` / `hbm` / `ddr` / a plan JSON file for (w, p, s)."""
  return x if isinstance(x, plan_lib.Plan) else inputs.load_plan(x, w, p, s)


def why_infeasible(
  hbm_required: float,
  hbm_available: float,
  ddr_required: float,
  ddr_available: float,
) -> str:
  """Which memory tier overflows, in one clause ("out of HBM: 95.0 GB
  needed of 80.0 GB per accelerator"). Bytes in, GB (1e9 B) out; HBM is
  per accelerator, DDR per node, as in `CostReport.memory_required`."""
  parts = []
  for tier, req, avail, per in (
    ('HBM', hbm_required, hbm_available, 'accelerator'),
    ('DDR', ddr_required, ddr_available, 'node'),
  ):
    if req > avail:
      parts.append(
        f'out of {tier}: {req / 1e9:,.1f} GB needed of {avail / 1e9:,.1f} '
        f'GB per {per}'
      )
  return '; '.join(parts) or 'a memory tier overflows'


def plain(x):
  """A numpy scalar as the Python value of the same repr (for CSV cells)."""
  return x.item() if isinstance(x, np.generic) else x
