"""Published DLRM training throughputs as cost-model cases, and an honest
way to calibrate the model's GPU defaults against them.

`data/calibration_cases.json` (a copy of ../shared/reference) holds
NVIDIA's measured PyTorch DLRM throughputs C1-C4 on A100 and V100 GPUs,
each in two precisions. `load()` turns every (case, precision) into a
`PublicCase`: the catalog platform cut to the GPUs the case used, the
nv_dlrm workload at the case's batch and precision, and the plan NVIDIA
describes in the file's `placement_note` (every table whole on one GPU,
all in HBM).

The catalog has no measured GPU profile. The share of HBM bandwidth that
embedding gathers and row updates reach is an assumption (0.5, after
torchrec's planner), and it is the term the published numbers disagree
with most: the assumption puts single-GPU steps 33-45% too fast in mixed
precision, with the GEMMs at their catalog peaks. So one number, the
*embedding efficiency* (gather and update efficiency together), is fitted
to published step times by Adam through the cost model, and judged by
leave-one-case-out: each case is predicted with the efficiency fitted on
the OTHER cases only (both precisions of a case leave together, since
they share hardware and embedding work). Cases of an older software stack
(`OTHER_SOFTWARE`) are judged but never fitted on. The fitted number
absorbs every per-sample cost the model does not name (PyTorch's
embedding kernels, index sorting, elementwise passes), so it describes
this software on these GPUs, not the HBM.
"""

import dataclasses
import json
import pathlib

import jax
import jax.numpy as jnp
import optax

from codesign import (
  cost_model,
  device_profile,
  hardware,
  platform_presets,
  workload_presets,
)
from codesign import plan as plan_lib
from codesign import workload as wl
from codesign.pytree import replace

CASES_FILE = pathlib.Path(__file__).parent / 'data' / 'calibration_cases.json'
# Which catalog platform and how many of its GPUs each case ran on.
PLATFORMS = {
  'C1': ('dgx_a100_80gb', 1),
  'C2': ('dgx1_v100', 8),
  'C3': ('dgx1_v100', 1),
  'C4': ('dgx1_v100', 1),
}
PRECISIONS = {'amp': 'fp16', 'fp32': 'fp32', 'tf32': 'tf32'}
# Cases whose software differs from the rest; never in a fitting set.
OTHER_SOFTWARE = {
  'C4': 'older implementation without CUDA graphs (April 2020), per '
  'calibration_cases.json; the other cases ran one newer stack',
}


@dataclasses.dataclass(frozen=True)
class PublicCase:
  """One published measurement, ready for the cost model.

  Attributes:
    name: `<case id>_<precision>`, e.g. `C1_amp`.
    case_id: `C1` .. `C4`.
    hardware: the file's description of the machine.
    platform: the catalog platform with the shipped default profile of its
      GPU applied (Python floats).
    workload: nv_dlrm_small or nv_dlrm_large at the case's batch and
      dense precision.
    plan: table-wise, everything in HBM (NVIDIA's placement).
    measured: published step time, seconds (global batch / records/s).
  """

  name: str
  case_id: str
  hardware: str
  platform: hardware.Platform
  workload: wl.Workload
  plan: plan_lib.Plan
  measured: float


def load(path: pathlib.Path = CASES_FILE) -> list[PublicCase]:
  """Every (case, precision) of the file, in file order."""
  data = json.loads(pathlib.Path(path).read_text())
  out = []
  for c in data['cases']:
    name, gpus = PLATFORMS[c['id']]
    base = replace(
      platform_presets.get(name),
      nodes=1.0,
      accelerators_per_node=float(gpus),
    )
    profile = device_profile.shipped(
      device_profile.profile_file_name(base.accelerator.name)
    )
    platform = device_profile.apply(base, profile)
    for prec, rate in sorted(c['records_per_s'].items()):
      w = dataclasses.replace(
        workload_presets.get(f'nv_dlrm_{c["model"]}'),
        global_batch=int(c['global_batch']),
        dense_precision=PRECISIONS[prec],
      )
      out.append(
        PublicCase(
          name=f'{c["id"]}_{prec}',
          case_id=c['id'],
          hardware=c['hardware'],
          platform=platform,
          workload=w,
          plan=plan_lib.make(
            w, platform, placement='hbm', sharding='table_wise'
          ),
          measured=w.global_batch / float(rate),
        )
      )
  return out


def with_embedding_efficiency(p: hardware.Platform, efficiency):
  """`p` with the GPU's gather and update efficiency set to `efficiency`."""
  acc = replace(
    p.accelerator, gather_efficiency=efficiency, update_efficiency=efficiency
  )
  return replace(p, accelerator=acc)


def predict(case: PublicCase, efficiency=None) -> cost_model.CostReport:
  """The cost model's report for `case`; `efficiency=None` keeps the shipped
  default profile."""
  p = hardware.as_arrays(case.platform)
  if efficiency is not None:
    p = with_embedding_efficiency(p, efficiency)
  return cost_model.evaluate(p, case.workload, case.plan)


def fitting_ids(cases: list[PublicCase], held_out: str | None) -> list[str]:
  """Case ids a fit may use when `held_out` is judged (None: all of them)."""
  ids = sorted({c.case_id for c in cases})
  return [i for i in ids if i != held_out and i not in OTHER_SOFTWARE]


def _log_step_times(cases: list[PublicCase], efficiency):
  """log predicted step times of all `cases`, shape (len(cases),)."""
  return jnp.stack([jnp.log(predict(c, efficiency).step_time) for c in cases])


def make_fitter(cases: list[PublicCase], steps: int = 300, lr: float = 0.1):
  """A jitted `fit(mask) -> (efficiency, final loss)` over `cases`.

  `mask` (shape (len(cases),), 0 or 1) selects the fitting set, so every
  leave-one-out fold reuses one compiled program. The loss is the mean
  squared log error over the selected cases; the efficiency moves as a
  logit with Adam from the shipped assumption 0.5.
  """
  log_measured = jnp.log(jnp.array([c.measured for c in cases]))
  tx = optax.adam(lr)

  def loss_fn(theta, mask):
    err = _log_step_times(cases, jax.nn.sigmoid(theta)) - log_measured
    return jnp.sum(mask * err * err) / jnp.sum(mask)

  @jax.jit
  def fit(mask):
    def body(carry, _):
      theta, state = carry
      loss, g = jax.value_and_grad(loss_fn)(theta, mask)
      upd, state = tx.update(g, state, theta)
      return (optax.apply_updates(theta, upd), state), loss

    theta0 = jnp.zeros((), log_measured.dtype)  # sigmoid(0) = 0.5
    (theta, _), _ = jax.lax.scan(
      body, (theta0, tx.init(theta0)), None, length=steps
    )
    return jax.nn.sigmoid(theta), loss_fn(theta, mask)

  return fit


def leave_one_case_out(cases: list[PublicCase], steps: int = 300) -> dict:
  """Fits of the embedding efficiency for out-of-sample judgement.

  Returns a dict with:
    folds: case id -> {fitted_on, efficiency, fit_loss}: the efficiency
      to predict that case with (`predict(case, efficiency)`), fitted
      without it;
    all: {fitted_on, efficiency, fit_loss}: fitted on every eligible case
      (a value to ship, not to judge with).
  Folds with the same fitting set (a case never fitted on, and `all`)
  share one fit.
  """
  fit = make_fitter(cases, steps)
  ids = [c.case_id for c in cases]
  fits = {}

  def run(fitted_on):
    key = tuple(fitted_on)
    if key not in fits:
      eff, loss = fit(jnp.array([float(i in fitted_on) for i in ids]))
      fits[key] = {
        'fitted_on': fitted_on,
        'efficiency': float(eff),
        'fit_loss': float(loss),
      }
    return fits[key]

  return {
    'folds': {i: run(fitting_ids(cases, i)) for i in sorted(set(ids))},
    'all': run(fitting_ids(cases, None)),
  }
