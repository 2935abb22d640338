"""The JSON schema of workloads, platforms, plans and stacks.

The schema is the boundary: keys carry units (`hbm_bandwidth_gb_per_s`)
and `codesign.core.units` converts to SI. Presets dump to this schema, and a
dumped file loads back to the identical object (bit for bit).

Loading follows the dataclasses: a key whose field has a default may be
left out (a workload without `optimizer` trains with `sgd`), every other
key is required (`sources` may always be left out). A file is checked as
a whole and every problem is reported at once, in one `InputError`: the
schema's (missing and unknown keys, values of the wrong type, negative
hardware numbers) and the objects' own checks (valid choices, ranges,
tables that fit the MLPs, a plan that fits the workload; the
`problems` functions of `workload`, `plan`, `stack` and
`platform_problems` here), which run on every field that could be read.

`schema_description()` lists every key with its type, unit, default, doc
and valid values; `schema_text()` prints it (`experiments.evaluate
--dump_schema`).
"""

import dataclasses
import inspect
import json
import math
import re
import typing

import numpy as np

from codesign.core.errors import raise_problems
from codesign.core.safe_json import MAX_INT_DIGITS
from codesign.core.units import UNITS, from_si_exact, to_si
from codesign.spec import hardware
from codesign.spec import plan as plan_lib
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl

# Valid values of the static choices, where the code knows them.
CHOICES: dict[tuple[type, str], tuple] = {
  (wl.Workload, 'interaction'): wl.INTERACTIONS,
  (wl.Workload, 'optimizer'): wl.OPTIMIZERS,
  (wl.Workload, 'dense_precision'): wl.DENSE_PRECISIONS,
  (wl.Table, 'precision'): wl.TABLE_PRECISIONS,
  (hardware.Platform, 'trainer'): hardware.TRAINERS,
  (hardware.Fabric, 'topology'): hardware.TOPOLOGIES,
  (hardware.Nic, 'attach'): hardware.NIC_ATTACH,
  (hardware.HostLink, 'kind'): hardware.HOST_LINK_KINDS,
  (hardware.CpuSocket, 'memory'): hardware.MEMORY_KINDS,
  (plan_lib.Plan, 'sharding'): plan_lib.SHARDINGS,
  (plan_lib.Plan, 'comm_precision'): plan_lib.COMM_PRECISIONS,
  (stack_lib.Stack, 'graph_scope'): stack_lib.GRAPH_SCOPES,
  (stack_lib.Stack, 'bottom_mlp'): stack_lib.BOTTOM_MLP_PLACEMENTS,
  (stack_lib.Stack, 'mlp_fusion'): stack_lib.MLP_FUSIONS,
  (stack_lib.Stack, 'embedding_kernel'): stack_lib.EMBEDDING_KERNELS,
  (stack_lib.Stack, 'update_path'): stack_lib.UPDATE_PATHS,
  (stack_lib.Stack, 'payload_precision'): stack_lib.PAYLOAD_PRECISIONS,
  (stack_lib.Stack, 'allreduce_precision'): stack_lib.ALLREDUCE_PRECISIONS,
  (stack_lib.Stack, 'id_bytes'): stack_lib.ID_BYTES,
}

# Per-table plan fields that also take one value for every table.
BROADCAST = {(plan_lib.Plan, 'hbm_fraction'), (plan_lib.Plan, 'sharding')}

# The top-level objects of the schema, by section name.
SECTIONS = {
  'workload': wl.Workload,
  'platform': hardware.Platform,
  'plan': plan_lib.Plan,
  'stack': stack_lib.Stack,
}


def json_key(f: dataclasses.Field) -> str:
  """The JSON key of a field: its name, suffixed by its boundary unit."""
  unit = f.metadata.get('unit')
  return f'{f.name}_{unit}' if unit else f.name


def json_fields(cls) -> dict[str, tuple]:
  """JSON key -> (field, its dataclass type or None) of dataclass `cls`."""
  hints = type_hints(cls)
  return {
    json_key(f): (
      f,
      hints[f.name] if _is_dataclass_type(hints[f.name]) else None,
    )
    for f in dataclasses.fields(cls)
  }


def _is_leaf(f: dataclasses.Field) -> bool:
  """Whether `f` is a pytree data leaf (hardware, stack and plan numbers).

  Fields of plain dataclasses (`Workload`, `Table`) have no metadata and
  are static."""
  return 'static' in f.metadata and not f.metadata['static']


def _has_default(f: dataclasses.Field) -> bool:
  return (
    f.default is not dataclasses.MISSING
    or f.default_factory is not dataclasses.MISSING
  )


def is_optional(f: dataclasses.Field) -> bool:
  """Whether the key of `f` may be left out of a JSON object."""
  return f.name == 'sources' or _has_default(f)


def type_hints(cls) -> dict:
  return typing.get_type_hints(cls)


def _is_dataclass_type(tp) -> bool:
  return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def tuple_item(tp):
  """X of `tuple[X, ...]`, else None."""
  if typing.get_origin(tp) is tuple:
    args = typing.get_args(tp)
    if len(args) == 2 and args[1] is Ellipsis:
      return args[0]
  return None


# ---- objects to JSON -------------------------------------------------------


def dataclass_to_json(obj) -> dict:
  """A workload, platform (or part), plan or stack as a JSON dict with
  unit-suffixed keys; numbers in the key's unit."""
  hints = type_hints(type(obj))
  return {
    json_key(f): _value_to_json(getattr(obj, f.name), f, hints[f.name])
    for f in dataclasses.fields(obj)
  }


def _value_to_json(value, f: dataclasses.Field, tp):
  if dataclasses.is_dataclass(value):
    return dataclass_to_json(value)
  if f.name == 'sources':
    return dict(value)
  if tp is np.ndarray:
    return [float(x) for x in np.asarray(value).reshape(-1)]
  if _is_leaf(f):
    unit = f.metadata.get('unit')
    x = float(np.asarray(value))
    return from_si_exact(x, unit) if unit else x
  if isinstance(value, tuple | list):
    return [
      dataclass_to_json(v) if dataclasses.is_dataclass(v) else v for v in value
    ]
  if tp is int and not isinstance(value, bool):
    return int(value)
  return value


def platform_to_json(p: hardware.Platform) -> dict:
  return dataclass_to_json(p)


def stack_to_json(s: stack_lib.Stack) -> dict:
  return dataclass_to_json(s)


def workload_to_json(w: wl.Workload) -> dict:
  return dataclass_to_json(w)


def plan_to_json(plan: plan_lib.Plan) -> dict:
  return dataclass_to_json(plan)


def with_defaults(section: str, d):
  """A copy of the JSON object `d` of `section` ('workload', 'platform',
  'plan' or 'stack') with every left-out key that has a default written
  in (nested objects and list items too), so that `--override` can set
  it. Anything that is not an object comes back as it is."""
  check_table_count(section, d)
  return _fill(SECTIONS[section], d)


def check_table_count(section: str, d, label: str | None = None) -> None:
  """Refuses a workload JSON object with more tables than
  `workload.BOUNDS` allows before any work (a million tables would take a
  minute to read, only to be refused)."""
  tables = d.get('tables') if isinstance(d, dict) else None
  if section != 'workload' or not isinstance(tables, list):
    return
  lo, hi = wl.BOUNDS['num_tables']
  if len(tables) > hi:
    raise_problems(
      [
        f'the number of workload.tables must be an integer in [{lo:.0f}, '
        f'{hi:.0f}], got {len(tables)}'
      ],
      label,
    )


def _fill(cls, d):
  if not isinstance(d, dict):
    return d
  hints = type_hints(cls)
  out = dict(d)
  for f in dataclasses.fields(cls):
    key, tp = json_key(f), hints[f.name]
    if key not in out:
      if _has_default(f):
        default = (
          f.default_factory() if f.default is dataclasses.MISSING else f.default
        )
        out[key] = _value_to_json(default, f, tp)
      continue
    item = tuple_item(tp)
    if _is_dataclass_type(tp):
      out[key] = _fill(tp, out[key])
    elif _is_dataclass_type(item) and isinstance(out[key], list):
      out[key] = [_fill(item, x) for x in out[key]]
  return out


# ---- JSON to objects -------------------------------------------------------


def _show(value) -> str:
  text = repr(value)
  return text if len(text) <= 40 else text[:37] + '...'


def _number(value, where: str, problems: list[str]):
  """`value` as a finite float, or None with its problem noted."""
  if isinstance(value, bool) or not isinstance(value, int | float):
    problems.append(f'{where} must be a number, got {_show(value)}')
    return None
  try:
    x = float(value)
  except OverflowError:  # an integer beyond float range
    x = float('inf')
  if not np.isfinite(x):
    problems.append(f'{where} must be finite, got {_show(value)}')
    return None
  return x


def _scalar(tp, f, value, where: str, problems: list[str]):
  """A bool, int, float or str value checked against its type, or None."""
  if tp is bool:
    if not isinstance(value, bool):
      problems.append(f'{where} must be true or false, got {_show(value)}')
      return None
    return value
  if tp is int:
    if (
      isinstance(value, bool)
      or not isinstance(value, int | float)
      or (isinstance(value, float) and not value.is_integer())
    ):
      problems.append(f'{where} must be an integer, got {_show(value)}')
      return None
    if abs(value) >= 10**MAX_INT_DIGITS:  # beyond what a float holds exactly
      problems.append(f'{where} must have at most {MAX_INT_DIGITS} digits')
      return None
    return int(value)
  if tp is float:
    x = _number(value, where, problems)
    if x is None:
      return None
    if f is not None and _is_leaf(f) and x < 0:
      problems.append(f'{where} must not be negative, got {x}')
      return None
    unit = f.metadata.get('unit') if f is not None else None
    return to_si(x, unit) if unit else x
  if tp is str:
    if not isinstance(value, str):
      problems.append(f'{where} must be a string, got {_show(value)}')
      return None
    return value
  return value


def _parse(tp, f, value, where: str, problems: list[str]):
  """The value of a field (or list item) of type `tp`; None where it
  cannot be read (its problem noted). A list of objects keeps the items
  it can read, a list of numbers or strings is None if any item is bad."""
  if f is not None and f.name == 'sources':
    if not isinstance(value, dict):
      problems.append(f'{where} must be an object of field -> source')
      return None
    return tuple((str(k), str(v)) for k, v in value.items())
  if _is_dataclass_type(tp):
    return _parse_dataclass(tp, value, where, problems)
  item = tuple_item(tp)
  if item is None and tp is not np.ndarray:
    return _scalar(tp, f, value, where, problems)
  if not isinstance(value, list):
    problems.append(f'{where} must be a list, got {_show(value)}')
    return None
  if tp is np.ndarray:
    xs = [_number(x, f'{where}.{i}', problems) for i, x in enumerate(value)]
    return None if None in xs else np.asarray(xs, dtype=np.float64)
  xs = [
    _parse(item, None, x, f'{where}.{i}', problems) for i, x in enumerate(value)
  ]
  if _is_dataclass_type(item):
    return tuple(xs)
  return None if None in xs else tuple(xs)


def _parse_dataclass(cls, d, where: str, problems: list[str]):
  """An instance of `cls` from its JSON object, every problem found on
  the way appended to `problems`. Fields that cannot be read (missing,
  wrong type) are None, so that the object's own checks still run on the
  others; None if `d` is not an object."""
  if not isinstance(d, dict):
    problems.append(f'{where} must be a JSON object, got {_show(d)}')
    return None
  hints = type_hints(cls)
  fields = {json_key(f): f for f in dataclasses.fields(cls)}
  unknown = [k for k in d if k not in fields]
  if unknown:
    names = ', '.join(f'{where}.{k}' for k in unknown)
    s = 's' if len(unknown) > 1 else ''
    problems.append(f'unknown key{s} {names} (valid keys: {", ".join(fields)})')
  kwargs = {}
  for key, f in fields.items():
    if key in d:
      kwargs[f.name] = _parse(
        hints[f.name], f, d[key], f'{where}.{key}', problems
      )
    elif f.name == 'sources' and not _has_default(f):
      kwargs[f.name] = ()
    elif not is_optional(f):
      problems.append(f'missing key {where}.{key}')
      kwargs[f.name] = None
  return cls(**kwargs)


def dataclass_from_json(cls, d: dict, where: str, label: str | None = None):
  """Inverse of `dataclass_to_json` (schema checks only). Raises one
  `InputError` naming every problem; `label` (a file name) heads it."""
  problems = []
  obj = _parse_dataclass(cls, d, where, problems)
  raise_problems(problems, label, where)
  return obj


def _load(cls, d, where, label, check):
  """Parses `d`, runs the object's own `check(obj) -> problems` on the
  fields that could be read, and raises once with every problem."""
  problems = []
  obj = _parse_dataclass(cls, d, where, problems)
  if obj is not None:
    problems += check(obj)
  raise_problems(problems, label, where)
  return obj


def platform_from_json(d: dict, label: str | None = None) -> hardware.Platform:
  return _load(hardware.Platform, d, 'platform', label, platform_problems)


def stack_from_json(d: dict, label: str | None = None) -> stack_lib.Stack:
  return _load(stack_lib.Stack, d, 'stack', label, stack_lib.problems)


def workload_from_json(d: dict, label: str | None = None) -> wl.Workload:
  check_table_count('workload', d, label)
  return _load(wl.Workload, d, 'workload', label, wl.problems)


def plan_from_json(
  d: dict, w: wl.Workload, label: str | None = None
) -> plan_lib.Plan:
  """A plan for `w`; per-table fields also take one value for all."""
  if isinstance(d, dict):
    d = dict(d)
    for _, name in BROADCAST:
      if name in d and not isinstance(d[name], list):
        d[name] = [d[name]] * w.num_tables
  return _load(
    plan_lib.Plan, d, 'plan', label, lambda p: plan_lib.problems(p, w)
  )


def platform_problems(p: hardware.Platform) -> list[str]:
  """Every reason `p` is not buildable, one sentence each. Fields and
  parts that are None (unreadable in a JSON file, reported there) are
  skipped."""
  out = []

  def choice(value, choices, what):
    if value is not None and value not in choices:
      out.append(
        f'unknown {what} {value!r} (valid choices: ' + ', '.join(choices) + ')'
      )

  choice(p.trainer, hardware.TRAINERS, 'trainer')
  if p.fabric is not None:
    choice(p.fabric.topology, hardware.TOPOLOGIES, 'topology')
  if p.nic is not None:
    choice(p.nic.attach, hardware.NIC_ATTACH, 'NIC attachment')
  if p.host_link is not None:
    choice(p.host_link.kind, hardware.HOST_LINK_KINDS, 'host link kind')
  if p.cpu is not None:
    choice(p.cpu.memory, hardware.MEMORY_KINDS, 'CPU memory kind')
  for path, value in _known_leaves(p, ''):
    if path == 'accelerators_per_node' and p.trainer == 'cpu':
      continue  # unused on a CPU trainer
    if _no_fabric_links(p, path, value):
      continue
    # In the key's unit, as the user wrote it.
    f = field_at(p, path)
    unit = f.metadata.get('unit')
    scale = UNITS[unit] if unit else 1.0
    lo, hi = (b / scale for b in hardware.BOUNDS[path])
    x = float(np.asarray(value)) / scale
    # A bound written in the key's unit converts to SI within an ulp.
    if not (math.isfinite(x) and lo * (1 - TOL) <= x <= hi * (1 + TOL)):
      out.append(
        f'platform.{json_path(p, path)} must lie in [{lo:g}, {hi:g}]'
        f'{" " + unit if unit else ""}, got {x:g}'
      )
    elif path in hardware.COUNTS and not x.is_integer():
      out.append(
        f'platform.{json_path(p, path)} is a count and must be a whole '
        f'number, got {x:g} (relaxed counts are for the search)'
      )
  for part in ('cpu', 'accelerator'):
    g = getattr(getattr(p, part, None), 'access_granularity', None)
    if g is not None and not 1 <= g <= MAX_ACCESS_GRANULARITY:
      out.append(
        f'platform.{part}.access_granularity must be an integer in [1, '
        f'{MAX_ACCESS_GRANULARITY}] (bytes), got {g}'
      )
  return out


# Relative slack of the bounds checks: a bound typed in the key's unit
# (0.1 us) may convert to SI an ulp outside the SI bound (1e-7 s).
TOL = 1e-12
# Largest access granularity accepted, bytes (cache lines and HBM bursts
# are 32-128 B; a 4 KiB page is the coarsest access a model could mean).
MAX_ACCESS_GRANULARITY = 4096


# A PCIe-only fabric's links and their rate, which its collectives never
# read: a card without NVLink (the L40S) has none, 0.
_UNUSED_ON_PCIE = ('fabric.links_per_accelerator', 'fabric.link_bandwidth')


def _no_fabric_links(p: hardware.Platform, path: str, value) -> bool:
  """Whether `value` at `path` is a PCIe-only fabric's 0 links (or 0
  B/s of them): a card without a fabric of its own, not out of bounds."""
  return (
    path in _UNUSED_ON_PCIE
    and p.fabric is not None
    and p.fabric.topology == 'pcie_only'
    and float(np.asarray(value)) == 0.0
  )


def field_at(obj, path: str) -> dataclasses.Field:
  """The dataclass field at a dotted internal path of `obj`."""
  head, _, rest = path.partition('.')
  if rest:
    return field_at(getattr(obj, head), rest)
  return next(f for f in dataclasses.fields(obj) if f.name == head)


def _known_leaves(obj, prefix: str):
  """(dotted path, value) of the data leaves of `obj` that are not None."""
  for f in dataclasses.fields(obj):
    value = getattr(obj, f.name)
    if f.metadata.get('static') or value is None:
      continue
    if dataclasses.is_dataclass(value):
      yield from _known_leaves(value, f'{prefix}{f.name}.')
    else:
      yield prefix + f.name, value


def validate_platform(p: hardware.Platform) -> hardware.Platform:
  """Raises `InputError` naming every problem if `p` is not buildable."""
  raise_problems(platform_problems(p), what='platform')
  return p


def json_path(obj, path: str) -> str:
  """The dotted JSON key (with its unit suffix) of an internal field path."""
  head, _, rest = path.partition('.')
  f = next(f for f in dataclasses.fields(obj) if f.name == head)
  if rest:
    return f'{head}.{json_path(getattr(obj, head), rest)}'
  return json_key(f)


# ---- the schema, described -------------------------------------------------


def attribute_docs(cls) -> dict[str, str]:
  """`name: text` entries of the `Attributes:` section of a docstring."""
  out, name, inside = {}, None, False
  for line in (inspect.getdoc(cls) or '').splitlines():
    if line.strip() == 'Attributes:':
      inside = True
      continue
    if not inside or not line.strip():
      continue
    m = re.match(r'^ {1,4}(\w+): (.*)$', line)
    if m and not line.startswith(' ' * 4):
      name = m[1]
      out[name] = m[2].strip()
    elif line.startswith(' ') and name:
      out[name] += ' ' + line.strip()
    else:
      break
  return out


def default_json(f: dataclasses.Field, tp):
  """The JSON value of field `f`'s default (of type `tp`), or None when
  it has none (a required key; `sources`, which may be left out)."""
  if f.name == 'sources' or not _has_default(f):
    return None
  value = f.default_factory() if f.default is dataclasses.MISSING else f.default
  return _value_to_json(value, f, tp)


def _type_name(cls, f: dataclasses.Field, tp) -> str:
  if f.name == 'sources':
    return 'object (field -> source)'
  if _is_dataclass_type(tp):
    return 'object'
  item = tuple_item(tp)
  if tp is np.ndarray:
    item = float
  names = {bool: 'true/false', int: 'integer', float: 'number', str: 'string'}
  if item is not None:
    each = 'objects' if _is_dataclass_type(item) else names[item] + 's'
    each = each.replace('true/falses', 'true/false values')
    if (cls, f.name) in BROADCAST:
      return f'{names[item]} or list of {each} (per table)'
    return f'list of {each}'
  return names.get(tp, str(tp))


def _describe(cls, prefix: str, out: list[dict]) -> None:
  hints = type_hints(cls)
  docs = attribute_docs(cls)
  for f in dataclasses.fields(cls):
    tp = hints[f.name]
    key = f'{prefix}.{json_key(f)}'
    unit = f.metadata.get('unit')
    if f.name == 'sources':
      default = '{}'
    elif f.default is not dataclasses.MISSING:
      default = json.dumps(_value_to_json(f.default, f, tp))
    elif f.default_factory is not dataclasses.MISSING:
      default = json.dumps(f.default_factory())
    else:
      default = 'required'
    choices = CHOICES.get((cls, f.name))
    out.append(
      {
        'key': key,
        'type': _type_name(cls, f, tp),
        'unit': unit,
        'si_factor': UNITS[unit] if unit else None,
        'default': default,
        'doc': docs.get(f.name) or f.metadata.get('doc', ''),
        'choices': list(choices) if choices else None,
      }
    )
    item = tuple_item(tp)
    if _is_dataclass_type(tp):
      _describe(tp, key, out)
    elif item is not None and _is_dataclass_type(item):
      _describe(item, f'{key}.<i>', out)


def schema_description() -> dict[str, list[dict]]:
  """The full schema: per section (workload, platform, plan, stack) one
  entry per key (nested objects and list items included, items as
  `<i>`), each a dict with `key` (dotted, as `--override` takes it),
  `type`, `unit` (the key's suffix, None when the key has none),
  `si_factor` (value x factor = SI), `default` (JSON text, or
  'required'), `doc`, and `choices` (valid values, None where free)."""
  out = {}
  for section, cls in SECTIONS.items():
    out[section] = []
    _describe(cls, section, out[section])
  return out


def schema_text(description: dict[str, list[dict]] | None = None) -> str:
  """`schema_description()` as text: one line per key with its type,
  unit, default and doc (valid values at the end)."""
  description = description or schema_description()
  rows = []
  for entries in description.values():
    for e in entries:
      unit = f'{e["unit"]} (x{e["si_factor"]:g})' if e['unit'] else '-'
      doc = e['doc']
      if e['choices']:
        doc += ' [one of: ' + ', '.join(map(str, e['choices'])) + ']'
      rows.append((e['key'], e['type'], unit, e['default'], doc))
  header = ('# key', 'type', 'unit', 'default', 'doc')
  widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
  lines = [
    '# Numbers are in the unit of their key suffix (unit column: value x '
    'factor = SI); keys with a default may be left out.'
  ]
  for r in [header, *rows]:
    cols = [r[i].ljust(widths[i]) for i in range(4)] + [r[4]]
    lines.append('  '.join(cols).rstrip())
  return '\n'.join(lines)
