"""The JSON inputs as a JSON Schema (draft 2020-12), with units and ranges.

`json_schema()` describes a file that holds any of the four inputs as
sections (`workload`, `platform`, `plan`, `stack`: a run's config.json
has this shape); `$defs` holds each section alone (`#/$defs/platform`)
and its partial form (`#/$defs/platform_partial`: a `base` and the keys
it changes, `codesign.boundary.inputs.resolve_base`). Every number
carries its unit twice: in its key's suffix and description, and in the
custom keywords `x-unit` (the suffix) and `x-si-factor` (value x factor
= SI). Ranges are `minimum`/`maximum` in the key's unit, from the
documented bounds (`hardware.BOUNDS`, `stack.BOUNDS` and
`STATIC_BOUNDS`, `workload.BOUNDS`; fractions of a plan in [0, 1]);
counts are integers (`hardware.COUNTS`).

Some checks are across keys and stay with the loaders
(`codesign.spec.schema`): every table's dim against the bottom MLP, a
plan's length against the workload's tables, a stack against its
trainer, the batch per rank.
"""

import dataclasses
import math

import numpy as np

from codesign.core.units import UNITS
from codesign.spec import hardware, schema
from codesign.spec import plan as plan_lib
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl

DRAFT = 'https://json-schema.org/draft/2020-12/schema'
ID = 'https://codesign.invalid/schemas/inputs.json'


def _bounds(section: str, path: str):
  """(lo, hi) in SI of the number at dotted `path` of `section`, or None."""
  name = path.rpartition('.')[2]
  if section == 'platform':
    if path.endswith('access_granularity'):
      return (1, schema.MAX_ACCESS_GRANULARITY)
    return hardware.BOUNDS.get(path)
  if section == 'stack':
    return stack_lib.BOUNDS.get(path) or stack_lib.STATIC_BOUNDS.get(path)
  if section == 'plan':
    return (0.0, 1.0) if name != 'column_shards' else (1, None)
  if path.startswith('tables.'):
    return wl.BOUNDS.get(name)
  return wl.BOUNDS.get(path)


def _integer(section: str, path: str, tp) -> bool:
  if tp is int:
    return True
  if section == 'platform':
    return path in hardware.COUNTS
  return section == 'workload' and path.rpartition('.')[2] in wl.INTEGERS


def _number(section, path, f, tp) -> dict:
  """The schema of a number: its type, range and unit in its key's unit."""
  unit = f.metadata.get('unit') if f is not None else None
  scale = UNITS[unit] if unit else 1.0
  out = {'type': 'integer' if _integer(section, path, tp) else 'number'}
  bounds = _bounds(section, path)
  if bounds is not None:
    lo, hi = bounds
    if lo is not None:
      out['minimum'] = _in_unit(lo, scale)
    if hi is not None:
      out['maximum'] = _in_unit(hi, scale)
  if unit:
    out['x-unit'] = unit
    out['x-si-factor'] = scale
  return out


def _in_unit(x: float, scale: float) -> float:
  """A bound in SI in the key's unit, with an ulp of slack where the
  division rounds (the loaders allow the same, `schema.TOL`)."""
  y = x / scale
  if y == int(y) and abs(y) < 2**53:
    return int(y) if float(int(y)) * scale == x else y
  return y


def _choices(cls, name: str):
  choices = schema.CHOICES.get((cls, name))
  return list(choices) if choices else None


def _scalar(section, path, cls, f, tp) -> dict:
  """The schema of a field that is not an object or a list."""
  choices = _choices(cls, f.name)
  if choices is not None:
    return {'enum': choices}
  if tp is bool:
    return {'type': 'boolean'}
  if tp is str:
    return {'type': 'string'}
  if tp in (int, float):
    return _number(section, path, f, tp)
  return {}


def _list(section, path, cls, f, tp, partial) -> dict:
  """The schema of a list field (tables, MLP widths, per-table plan
  values, a stack's trainers and vendors)."""
  item = schema.tuple_item(tp) if tp is not np.ndarray else float
  if dataclasses.is_dataclass(item):
    items = _object(section, f'{path}.', item, partial)
  elif f.name in ('bottom_mlp', 'top_mlp'):
    items = _number(section, 'mlp_width', None, int)
  elif f.name in ('trainers', 'vendors'):
    items = {
      'enum': list(
        hardware.TRAINERS if f.name == 'trainers' else stack_lib.VENDORS
      )
    }
  elif cls is plan_lib.Plan and f.name == 'sharding':
    items = {'enum': list(plan_lib.SHARDINGS)}
  else:
    items = _number(section, path, f, item)
  out = {'type': 'array', 'items': items}
  count = {'tables': 'num_tables'}.get(f.name)
  if f.name in ('bottom_mlp', 'top_mlp'):
    count = 'mlp_layers'
  if count:
    lo, hi = wl.BOUNDS[count]
    out['minItems'], out['maxItems'] = int(lo), int(hi)
  if (cls, f.name) in schema.BROADCAST:  # one value for every table too
    return {'anyOf': [items, out]}
  return out


def _field(section, path, cls, f, tp, partial) -> dict:
  if f.name == 'sources':
    return {'type': 'object', 'additionalProperties': {'type': 'string'}}
  if dataclasses.is_dataclass(tp):
    return _object(section, f'{path}.', tp, partial)
  if tp is np.ndarray or schema.tuple_item(tp) is not None:
    return _list(section, path, cls, f, tp, partial)
  return _scalar(section, path, cls, f, tp)


def _object(section: str, prefix: str, cls, partial: bool) -> dict:
  """The schema of dataclass `cls` at `prefix` (dotted, '' at the top):
  every key with its description (the field's doc, unit, default);
  required keys unless `partial`; no other keys."""
  hints = schema.type_hints(cls)
  docs = schema.attribute_docs(cls)
  props, required = {}, []
  for f in dataclasses.fields(cls):
    # A list of objects is described per item: its path has no index.
    path = prefix + f.name
    sub = _field(section, path, cls, f, hints[f.name], partial)
    sub['description'] = _description(f, docs)
    default = schema.default_json(f, hints[f.name])
    if default is not None:
      sub['default'] = default
    props[schema.json_key(f)] = sub
    if not schema.is_optional(f):
      required.append(schema.json_key(f))
  out = {'type': 'object', 'properties': props, 'additionalProperties': False}
  if required and not partial:
    out['required'] = required
  return out


def _description(f: dataclasses.Field, docs: dict) -> str:
  text = docs.get(f.name) or f.metadata.get('doc', '')
  unit = f.metadata.get('unit')
  if unit:
    text += f' [unit: {unit}; value x {UNITS[unit]:g} = SI]'
  return text


def _section(name: str, partial: bool) -> dict:
  cls = schema.SECTIONS[name]
  out = _object(name, '', cls, partial)
  if name == 'platform':
    # accelerators_per_node is unused (0 in the presets) on a CPU trainer.
    apn = out['properties']['accelerators_per_node']
    apn['minimum'] = 0
    out['if'] = {
      'properties': {'trainer': {'const': 'accelerator'}},
      'required': ['trainer'],
    }
    lo = hardware.BOUNDS['accelerators_per_node'][0]
    out['then'] = {
      'properties': {'accelerators_per_node': {'minimum': int(lo)}}
    }
  if partial:
    out['properties'] = {
      'base': {
        'type': 'string',
        'minLength': 1,
        'description': f'the {name} preset, or a JSON file (relative to '
        'this one), that the other keys change',
      },
      **out['properties'],
    }
    out['required'] = ['base']
  out['title'] = name + (' (partial: a base and changes)' if partial else '')
  return out


def json_schema() -> dict:
  """The JSON Schema (draft 2020-12) of the inputs: an object with any
  of the sections `workload`, `platform`, `plan` and `stack`, each a
  whole input or (workload, platform, stack) a partial one."""
  defs, props = {}, {}
  for name in schema.SECTIONS:
    defs[name] = _section(name, partial=False)
    ref = {'$ref': f'#/$defs/{name}'}
    if name == 'plan':
      props[name] = ref
      continue
    defs[f'{name}_partial'] = _section(name, partial=True)
    props[name] = {
      'if': {'type': 'object', 'required': ['base']},
      'then': {'$ref': f'#/$defs/{name}_partial'},
      'else': ref,
    }
  return {
    '$schema': DRAFT,
    '$id': ID,
    'title': 'codesign inputs',
    'description': 'A workload, platform, plan and stack, each optional '
    "(a run's config.json has all four). Numbers are in the unit of "
    'their key suffix (x-unit; value x x-si-factor = SI). Cross-key '
    'rules (table dims against the bottom MLP, a plan against the '
    'workload, the batch per rank) are checked when the inputs load.',
    'type': 'object',
    'properties': props,
    '$defs': defs,
  }


def is_finite_schema(d) -> bool:
  """Whether every number in the schema `d` is finite (JSON has no
  infinities)."""
  if isinstance(d, dict):
    return all(is_finite_schema(v) for v in d.values())
  if isinstance(d, list):
    return all(is_finite_schema(v) for v in d)
  if isinstance(d, float):
    return math.isfinite(d)
  return True
