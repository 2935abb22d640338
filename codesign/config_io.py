"""JSON in and out for workloads, platforms, plans and stacks, and
`--override`.

The JSON schema is the boundary: keys carry units (`hbm_bandwidth_gb_per_s`)
and `codesign.units` converts to SI. Presets dump to this schema, and a
dumped file loads back to the identical object (bit for bit).
"""

import dataclasses
import json
import pathlib

import numpy as np

from codesign import (
  hardware,
  planner,
  platform_presets,
  stack_presets,
  workload_presets,
)
from codesign import plan as plan_lib
from codesign import stack as stack_lib
from codesign import workload as wl
from codesign.errors import InputError
from codesign.units import UNITS, from_si_exact, to_si

_PARTS = {
  'cpu': hardware.CpuSocket,
  'accelerator': hardware.Accelerator,
  'fabric': hardware.Fabric,
  'host_link': hardware.HostLink,
  'nic': hardware.Nic,
}


def _key(f: dataclasses.Field) -> str:
  unit = f.metadata.get('unit')
  return f'{f.name}_{unit}' if unit else f.name


def dataclass_to_json(obj) -> dict:
  """A hardware dataclass as a JSON dict with unit-suffixed keys."""
  out = {}
  for f in dataclasses.fields(obj):
    value = getattr(obj, f.name)
    if dataclasses.is_dataclass(value):
      out[f.name] = dataclass_to_json(value)
    elif f.name == 'sources':
      out[f.name] = dict(value)
    elif f.metadata.get('static'):
      out[f.name] = value
    else:
      unit = f.metadata.get('unit')
      x = float(np.asarray(value))
      out[_key(f)] = from_si_exact(x, unit) if unit else x
  return out


def _check_keys(d: dict, allowed: list[str], where: str):
  if not isinstance(d, dict):
    raise InputError(f'{where} must be a JSON object')
  unknown = [k for k in d if k not in allowed]
  if unknown:
    raise InputError(
      f'unknown key {where}.{unknown[0]}; valid keys: ' + ', '.join(allowed)
    )
  missing = [k for k in allowed if k not in d and k != 'sources']
  if missing:
    raise InputError(f'missing key {where}.{missing[0]}')


def _number(value, where: str) -> float:
  if isinstance(value, bool) or not isinstance(value, int | float):
    raise InputError(f'{where} must be a number, got {value!r}')
  x = float(value)
  if not np.isfinite(x):
    raise InputError(f'{where} must be finite, got {value!r}')
  return x


def _static(value, f: dataclasses.Field, where: str):
  """A static field's value, checked against the field's type."""
  kind = f.type if isinstance(f.type, type) else None
  if kind is bool and not isinstance(value, bool):
    raise InputError(f'{where} must be true or false, got {value!r}')
  if kind is int:
    if isinstance(value, bool) or not isinstance(value, int | float):
      raise InputError(f'{where} must be an integer, got {value!r}')
    if float(value) != int(value):
      raise InputError(f'{where} must be an integer, got {value!r}')
    return int(value)
  if kind is float:
    return _number(value, where)
  if kind is str and not isinstance(value, str):
    raise InputError(f'{where} must be a string, got {value!r}')
  return value


def dataclass_from_json(cls, d: dict, where: str):
  """Inverse of `dataclass_to_json`; one-sentence errors on bad input."""
  fields = dataclasses.fields(cls)
  _check_keys(d, [_key(f) for f in fields], where)
  kwargs = {}
  for f in fields:
    key = _key(f)
    if f.name in _PARTS:
      kwargs[f.name] = dataclass_from_json(
        _PARTS[f.name], d[key], f'{where}.{key}'
      )
    elif f.name == 'sources':
      src = d.get('sources', {})
      kwargs[f.name] = tuple((str(k), str(v)) for k, v in src.items())
    elif f.metadata.get('static'):
      kwargs[f.name] = _static(d[key], f, f'{where}.{key}')
    else:
      x = _number(d[key], f'{where}.{key}')
      if x < 0:
        raise InputError(f'{where}.{key} must not be negative, got {x}')
      unit = f.metadata.get('unit')
      kwargs[f.name] = to_si(x, unit) if unit else x
  return cls(**kwargs)


def platform_to_json(p: hardware.Platform) -> dict:
  return dataclass_to_json(p)


def platform_from_json(d: dict) -> hardware.Platform:
  p = dataclass_from_json(hardware.Platform, d, 'platform')
  return validate_platform(p)


def validate_platform(p: hardware.Platform) -> hardware.Platform:
  """Raises `InputError` with one sentence if `p` is not buildable."""

  def choice(value, choices, what):
    if value not in choices:
      raise InputError(
        f'unknown {what} {value!r}; valid choices: ' + ', '.join(choices)
      )

  choice(p.trainer, hardware.TRAINERS, 'trainer')
  choice(p.fabric.topology, hardware.TOPOLOGIES, 'topology')
  choice(p.nic.attach, hardware.NIC_ATTACH, 'NIC attachment')
  for path in hardware.leaf_paths(p):
    x = float(np.asarray(hardware.get_value(p, path)))
    lo = hardware.BOUNDS[path][0]
    if path == 'accelerators_per_node' and p.trainer == 'cpu':
      continue  # unused on a CPU trainer
    if lo > 0 and not x > 0:
      raise InputError(f'platform.{_json_path(p, path)} must be positive')
  return p


def _json_path(obj, path: str) -> str:
  """The dotted JSON key (with its unit suffix) of an internal field path."""
  head, _, rest = path.partition('.')
  f = next(f for f in dataclasses.fields(obj) if f.name == head)
  if rest:
    return f'{head}.{_json_path(getattr(obj, head), rest)}'
  return _key(f)


def stack_to_json(s: stack_lib.Stack) -> dict:
  return dataclass_to_json(s)


def stack_from_json(d: dict) -> stack_lib.Stack:
  return stack_lib.validate(dataclass_from_json(stack_lib.Stack, d, 'stack'))


def workload_to_json(w: wl.Workload) -> dict:
  d = dataclasses.asdict(w)
  d['tables'] = [dataclasses.asdict(t) for t in w.tables]
  for key in ('bottom_mlp', 'top_mlp'):
    d[key] = list(d[key])
  return d


def workload_from_json(d: dict) -> wl.Workload:
  names = [f.name for f in dataclasses.fields(wl.Workload)]
  _check_keys(d, names, 'workload')
  tables = d['tables']
  if not isinstance(tables, list):
    raise InputError('workload.tables must be a list')
  tnames = [f.name for f in dataclasses.fields(wl.Table)]
  parsed = []
  for i, t in enumerate(tables):
    _check_keys(t, tnames, f'workload.tables.{i}')
    for key in ('rows', 'dim', 'pooling'):
      _number(t[key], f'workload.tables.{i}.{key}')
    parsed.append(
      wl.Table(
        int(t['rows']), int(t['dim']), float(t['pooling']), str(t['precision'])
      )
    )
  for key in (
    'num_dense',
    'global_batch',
    'dcn_layers',
    'dcn_rank',
    'popularity_skew',
  ):
    _number(d[key], f'workload.{key}')
  for key in ('bottom_mlp', 'top_mlp'):
    if not isinstance(d[key], list):
      raise InputError(f'workload.{key} must be a list of widths')
    for i, x in enumerate(d[key]):
      _number(x, f'workload.{key}.{i}')
  w = wl.Workload(
    name=str(d['name']),
    tables=tuple(parsed),
    num_dense=int(d['num_dense']),
    bottom_mlp=tuple(int(x) for x in d['bottom_mlp']),
    top_mlp=tuple(int(x) for x in d['top_mlp']),
    interaction=str(d['interaction']),
    dcn_layers=int(d['dcn_layers']),
    dcn_rank=int(d['dcn_rank']),
    global_batch=int(d['global_batch']),
    optimizer=str(d['optimizer']),
    dense_precision=str(d['dense_precision']),
    popularity_skew=float(d['popularity_skew']),
    source=str(d['source']),
  )
  return wl.validate(w)


def plan_to_json(plan: plan_lib.Plan) -> dict:
  return {
    'hbm_fraction': [float(x) for x in np.asarray(plan.hbm_fraction)],
    'cpu_lookup_fraction': float(np.asarray(plan.cpu_lookup_fraction)),
    'overlap': float(np.asarray(plan.overlap)),
    'sharding': list(plan.sharding),
    'column_shards': int(plan.column_shards),
    'comm_precision': plan.comm_precision,
  }


def plan_from_json(d: dict, w: wl.Workload) -> plan_lib.Plan:
  _check_keys(d, list(plan_to_json(_dummy_plan(w))), 'plan')
  t = w.num_tables
  frac = d['hbm_fraction']
  frac = [frac] * t if not isinstance(frac, list) else frac
  sharding = d['sharding']
  sharding = [sharding] * t if isinstance(sharding, str) else sharding
  for i, x in enumerate(frac):
    _number(x, f'plan.hbm_fraction.{i}')
  p = plan_lib.Plan(
    hbm_fraction=np.asarray(frac, dtype=np.float64),
    cpu_lookup_fraction=_number(
      d['cpu_lookup_fraction'], 'plan.cpu_lookup_fraction'
    ),
    overlap=_number(d['overlap'], 'plan.overlap'),
    sharding=tuple(str(s) for s in sharding),
    column_shards=int(_number(d['column_shards'], 'plan.column_shards')),
    comm_precision=str(d['comm_precision']),
  )
  return plan_lib.validate(p, w)


def _dummy_plan(w):
  return plan_lib.Plan(
    np.zeros(w.num_tables), 1.0, 0.0, ('table_wise',) * w.num_tables, 1, 'fp32'
  )


def read_json(path: str, what: str) -> dict:
  """Reads a JSON file; one-sentence errors for missing or malformed ones."""
  p = pathlib.Path(path)
  if not p.is_file():
    raise InputError(f'{what} file {path!r} does not exist')
  try:
    return json.loads(p.read_text())
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise InputError(f'{what} file {path!r} is not valid JSON ({e})') from None


def _looks_like_path(name: str) -> bool:
  return name.endswith('.json') or '/' in name


def _from_file(path: str, what: str) -> dict:
  d = read_json(path, what)
  # A run's config.json holds all three inputs; accept it directly.
  if isinstance(d, dict) and what in d and isinstance(d[what], dict):
    return d[what]
  return d


def workload_json(name_or_path: str) -> dict:
  if _looks_like_path(name_or_path):
    return _from_file(name_or_path, 'workload')
  return workload_to_json(workload_presets.get(name_or_path))


def stack_json(name_or_path: str) -> dict:
  if _looks_like_path(name_or_path):
    return _from_file(name_or_path, 'stack')
  return stack_to_json(stack_presets.get(name_or_path))


def platform_json(name_or_path: str) -> dict:
  if _looks_like_path(name_or_path):
    return _from_file(name_or_path, 'platform')
  return platform_to_json(platform_presets.get(name_or_path))


def _parse_value(text: str):
  try:
    return json.loads(text)
  except json.JSONDecodeError:
    return text


def apply_override(tree: dict, path: list[str], value, where: str):
  """Sets `tree[path]` in place; lists take an index or broadcast a scalar."""
  node = tree
  for i, part in enumerate(path):
    last = i == len(path) - 1
    here = '.'.join([where] + path[: i + 1])
    if isinstance(node, list):
      if not part.isdigit() or int(part) >= len(node):
        raise InputError(
          f'override key {here} needs an index below {len(node)}'
        )
      idx = int(part)
      if last:
        node[idx] = value
        return
      node = node[idx]
    elif isinstance(node, dict):
      if part not in node or part == 'sources':
        keys = [k for k in node if k != 'sources']
        raise InputError(
          f'unknown override key {here}; valid keys there: ' + ', '.join(keys)
        )
      if last:
        old = node[part]
        if isinstance(old, list) and not isinstance(value, list):
          if old and isinstance(old[0], dict):
            raise InputError(f'override key {here} needs an index')
          node[part] = [value] * len(old)
        else:
          node[part] = value
        return
      node = node[part]
    else:
      raise InputError(f'override key {here} goes below a value')


def split_overrides(overrides: list[str]) -> dict[str, list]:
  """'section.a.b=value' strings -> {section: [(path, value), ...]}."""
  out = {'workload': [], 'platform': [], 'plan': [], 'stack': []}
  for text in overrides or []:
    key, sep, value = text.partition('=')
    if not sep:
      raise InputError(f'override {text!r} is not of the form key=value')
    section, *path = key.strip().split('.')
    if section not in out or not path:
      raise InputError(
        f'override key {key!r} must start with workload., platform., plan. '
        'or stack.'
      )
    out[section].append((path, _parse_value(value.strip())))
  return out


# Device profile applied by `resolve` when none is passed (set from the
# scripts' --device_profile flag by `experiments.common.run_main`).
_default_device_profile: str | None = None


def set_default_device_profile(path: str | None) -> None:
  """Makes `resolve` apply the profile at `path` (None: no profile)."""
  global _default_device_profile
  _default_device_profile = path


def resolve(
  workload: str,
  platform: str,
  plan: str = 'auto',
  overrides: list[str] | None = None,
  device_profile: str | None = None,
  stack: str = stack_presets.DEFAULT,
):
  """Loads and overrides the four inputs. Returns (workload, platform,
  plan, stack) objects; raises `InputError` on any bad input.

  A device profile (`device_profile`, else the default set by
  `set_default_device_profile`) writes its efficiency fields into the
  platform's training part before the overrides (see
  `codesign.device_profile.apply_to_json`). A named plan is made by
  `codesign.planner.make` for the resolved stack.
  """
  ov = split_overrides(overrides)
  wj = workload_json(workload)
  for path, value in ov['workload']:
    apply_override(wj, path, value, 'workload')
  w = workload_from_json(wj)
  pj = platform_json(platform)
  profile_path = device_profile or _default_device_profile
  if profile_path:
    from codesign import device_profile as profiles

    pj = profiles.apply_to_json(pj, profiles.load(profile_path))
  for path, value in ov['platform']:
    apply_override(pj, path, value, 'platform')
  p = platform_from_json(pj)
  sj = stack_json(stack)
  for path, value in ov['stack']:
    apply_override(sj, path, value, 'stack')
  s = stack_from_json(sj)
  if _looks_like_path(plan):
    plj = _from_file(plan, 'plan')
  else:
    plj = plan_to_json(planner.make(w, p, s, placement=plan))
  for path, value in ov['plan']:
    apply_override(plj, path, value, 'plan')
  return w, p, plan_from_json(plj, w), s


__all__ = ['UNITS', 'resolve']
