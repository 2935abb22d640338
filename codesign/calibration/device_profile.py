"""Device profiles: what a JAX device really does, in cost-model terms.

A profile is a JSON dict holding the efficiency fields of one device part
of the cost model (`gemm_efficiency`, `gemm_half_size`,
`gather_efficiency`, `update_efficiency`, `kernel_overhead_us`) and the
platform's `step_overhead_us` (on an accelerator, `gemm_efficiency` is
that of its fp32 units' GEMMs too: one measured number); a measured
profile also holds the device's sustained peaks (`peak_flops_fp32_tflops`,
`peak_flops_bf16_tflops`) and memory bandwidth
(`memory_bandwidth_gb_per_s`). Units are in the key names.

This module is the profile data: `validate`, `load`, `save`, `shipped`
(the profiles in `codesign/data/profiles/`), `apply_to_json` (writes a
profile into a platform's JSON: the accelerator of an accelerator
trainer, the CPU socket of a CPU trainer, so every experiment can load
one with `--device_profile=path`), `default_profile` of a catalog
accelerator, and the one-device platform, stack and plan of a measured
profile (`local_platform`, `local_stack`, `local_plan`).

Measuring one is elsewhere: `codesign.calibration.microbenchmarks` times the
local device, `codesign.calibration.profile_fit` fits a profile to those times
through the cost model, and `codesign.studies.calibration` runs both and judges
the profile on real train steps.
"""

import json
import math
import pathlib

import jax

from codesign.core import safe_json
from codesign.core.errors import InputError
from codesign.core.paths import DATA_DIR
from codesign.core.pytree import replace
from codesign.model import planner
from codesign.spec import hardware, platform_presets, stack_presets
from codesign.spec import plan as plan_lib
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl

PROFILES_DIR = DATA_DIR / 'profiles'
TARGETS = ('cpu', 'accelerator')
# Fitted fields: name in the JSON -> (part field, unit multiplier to SI).
EFFICIENCY_KEYS = {
  'gemm_efficiency': ('gemm_efficiency', 1.0),
  'gemm_half_size': ('gemm_half_size', 1.0),
  'gather_efficiency': ('gather_efficiency', 1.0),
  'update_efficiency': ('update_efficiency', 1.0),
  'kernel_overhead_us': ('kernel_overhead', 1e-6),
}
# Measured fields (optional in a profile; needed to build a local platform).
PEAK_KEYS = {
  'peak_flops_fp32_tflops': 1e12,
  'peak_flops_bf16_tflops': 1e12,
  'memory_bandwidth_gb_per_s': 1e9,
}

# ---- profiles as JSON -------------------------------------------------------


def _number(d: dict, key: str, where: str, lo: float, hi: float) -> float:
  v = d[key]
  if isinstance(v, bool) or not isinstance(v, int | float):
    raise InputError(f'{where}: {key} must be a number, got {v!r}')
  v = float(v)
  if not (math.isfinite(v) and lo <= v <= hi):
    raise InputError(f'{where}: {key} must lie in [{lo:g}, {hi:g}], got {v}')
  return v


def validate(profile: dict, where: str = 'device profile') -> dict:
  """Raises `InputError` (one sentence) unless `profile` is usable."""
  if not isinstance(profile, dict):
    raise InputError(f'{where} must be a JSON object')
  required = ['target', *EFFICIENCY_KEYS]
  missing = [k for k in required if k not in profile]
  if missing:
    raise InputError(f'{where} lacks the key {missing[0]!r}')
  if profile['target'] not in TARGETS:
    raise InputError(
      f'{where}: target must be one of {", ".join(TARGETS)}, got '
      f'{profile["target"]!r}'
    )
  part = 'cpu' if profile['target'] == 'cpu' else 'accelerator'
  for key, (fname, scale) in EFFICIENCY_KEYS.items():
    lo, hi = hardware.BOUNDS[f'{part}.{fname}']
    _number(profile, key, where, lo / scale, hi / scale)
  if 'step_overhead_us' in profile:
    lo, hi = stack_lib.BOUNDS['step_floor']
    _number(profile, 'step_overhead_us', where, lo * 1e6, hi * 1e6)
  for key in PEAK_KEYS:
    if key in profile:
      _number(profile, key, where, 1e-6, 1e6)
  return profile


def load(path: str | pathlib.Path) -> dict:
  """Reads and validates a profile JSON file (one-sentence errors)."""
  d = safe_json.read(path, 'device profile')
  return validate(d, f'device profile {str(path)!r}')


def save(path: str | pathlib.Path, profile: dict) -> None:
  """Writes a profile atomically with sorted keys (reproducible bytes)."""
  from codesign.core import results

  validate(profile)
  results.write_json(pathlib.Path(path), profile)


def shipped(name: str) -> dict:
  """A profile shipped in `codesign/data/profiles/` (without `.json`)."""
  return load(PROFILES_DIR / f'{name}.json')


def _article(target: str) -> str:
  return ('an ' if target[0] in 'aeiou' else 'a ') + target


def apply_to_json(platform_json: dict, profile: dict) -> dict:
  """A platform JSON dict with the profile's efficiency fields written in.

  The profile must describe the part that trains: `cpu` for a CPU
  trainer, `accelerator` otherwise. (Its `step_overhead_us`, the cost of
  one jitted call, belongs to the `jax_xla` stack: `local_stack`.)
  Returns a new dict; raises `InputError` on a mismatch.
  """
  validate(profile)
  out = json.loads(json.dumps(platform_json))
  trainer = out.get('trainer')
  part = 'cpu' if trainer == 'cpu' else 'accelerator'
  if profile['target'] != part:
    raise InputError(
      f'the device profile describes {_article(profile["target"])} but '
      f'platform {out.get("name")!r} trains on its {part}'
    )
  for key in EFFICIENCY_KEYS:
    out[part][key] = float(profile[key])
  fields = [fname for fname, _ in EFFICIENCY_KEYS.values()]
  if part == 'accelerator':
    # One measured GEMM efficiency: the device's matmuls at its own
    # rates, for the tensor cores and the fp32 units alike.
    out[part]['fp32_gemm_efficiency'] = float(profile['gemm_efficiency'])
    fields.append('fp32_gemm_efficiency')
  src = out[part].get('sources', {})
  for fname in fields:
    src[fname] = 'device profile: ' + str(profile.get('source', ''))
  out[part]['sources'] = src
  return out


def apply(platform: hardware.Platform, profile: dict) -> hardware.Platform:
  """`apply_to_json` for a `Platform` object."""
  from codesign.spec import schema

  pj = apply_to_json(schema.platform_to_json(platform), profile)
  return schema.platform_from_json(pj)


# ---- the local device as a platform ----------------------------------------


def local_platform(profile: dict) -> hardware.Platform:
  """One node with one device (the local JAX device) from a measured profile.

  A `cpu` profile gives a CPU trainer with one socket; an `accelerator`
  profile a one-accelerator platform with the tables in its memory. Fields
  the profile does not measure (capacities, links, prices) come from the
  `cpu_2s` (CPU) or `dgx_a100_80gb` (accelerator) presets; with one device
  and one node they do not enter the step time.
  """
  validate(profile)
  missing = [k for k in PEAK_KEYS if k not in profile]
  if missing:
    raise InputError(f'the device profile lacks the measured {missing[0]!r}')
  peak32 = profile['peak_flops_fp32_tflops'] * 1e12
  peak16 = profile['peak_flops_bf16_tflops'] * 1e12
  bw = profile['memory_bandwidth_gb_per_s'] * 1e9
  eff = {
    fname: float(profile[key]) * scale
    for key, (fname, scale) in EFFICIENCY_KEYS.items()
  }
  if profile['target'] == 'cpu':
    base = platform_presets.get('cpu_2s')
    cpu = replace(
      base.cpu,
      name='local ' + str(profile.get('device_kind', 'cpu')),
      peak_flops_fp32=peak32,
      peak_flops_bf16=peak16,
      ddr_bandwidth=bw,
      **eff,
    )
    return replace(
      base,
      name='local_cpu',
      nodes=1.0,
      sockets_per_node=1.0,
      cpu=cpu,
    )
  base = platform_presets.get('dgx_a100_80gb')
  acc = replace(
    base.accelerator,
    name='local ' + str(profile.get('device_kind', 'accelerator')),
    peak_flops_fp32=peak32,
    peak_flops_tf32=peak32,
    peak_flops_bf16=peak16,
    hbm_bandwidth=bw,
    **eff,
    # The measured rates are the device's own matmuls (fp32 as its
    # TF32 rate): one efficiency for every precision.
    fp32_gemm_efficiency=eff['gemm_efficiency'],
  )
  return replace(
    base,
    name='local_accelerator',
    nodes=1.0,
    accelerators_per_node=1.0,
    accelerator=acc,
  )


def local_stack(profile: dict) -> stack_lib.Stack:
  """The `jax_xla` stack on the profiled device: its per-step floor is the
  measured cost of one jitted call (`step_overhead_us`)."""
  s = stack_presets.get('jax_xla')
  step = float(profile.get('step_overhead_us', s.step_floor * 1e6)) * 1e-6
  return replace(s, step_floor=step)


def local_plan(w: wl.Workload, p: hardware.Platform) -> plan_lib.Plan:
  """All tables in the device's memory; nothing overlaps (one device runs
  every op in turn, so there is no communication to hide)."""
  pl = planner.make(w, p, stack_presets.get('jax_xla'), placement='hbm')
  return replace(pl, overlap=0.0)


# ---- profiles of devices ---------------------------------------------------


def device_description() -> dict:
  """What the default JAX device is, as profile keys: `backend`,
  `device_kind`, `platform` (strings)."""
  d = jax.devices()[0]
  return {
    'backend': jax.default_backend(),
    'device_kind': d.device_kind,
    'platform': d.platform,
  }


def default_profile(accelerator_name: str) -> dict:
  """The shipped default profile of a catalog accelerator.

  These are NOT measurements: they repeat the catalog's assumed
  efficiencies (`catalog.ASSUMED`, each with its reasoning), the priors
  from which `codesign.calibration.public_cases` fits. Nothing in them is tuned
  on the public calibration cases (the GEMM numbers fitted there ship in
  `data/stack_fit.json` and reach the catalog parts directly).
  """
  from codesign.spec import catalog

  catalog.accelerator(accelerator_name)  # raises InputError if unknown
  a = catalog.assumed
  return {
    'target': 'accelerator',
    'accelerator': accelerator_name,
    'gemm_efficiency': a('accel_gemm_efficiency'),
    'gemm_half_size': a('accel_gemm_half_size'),
    'gather_efficiency': a('accel_gather_efficiency'),
    'update_efficiency': a('accel_update_efficiency'),
    'kernel_overhead_us': a('accel_kernel_overhead_us'),
    'source': 'default (assumption, not measured): codesign.catalog.ASSUMED '
    'accel_* values',
    'assumptions': {
      k: catalog.ASSUMED[k][1]
      for k in (
        'accel_gemm_efficiency',
        'accel_gemm_half_size',
        'accel_gather_efficiency',
        'accel_update_efficiency',
        'accel_kernel_overhead_us',
      )
    },
  }


def profile_file_name(accelerator_name: str) -> str:
  """'A100-SXM4-80GB' -> 'a100_sxm4_80gb'."""
  return accelerator_name.lower().replace('-', '_').replace(' ', '_')
