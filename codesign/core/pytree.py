"""Frozen dataclasses that are JAX pytrees.

A field is either *data* (a leaf that `jit`, `vmap` and `grad` see) or
*static* (hashable metadata such as a topology name, part of the treedef).
Fields may also carry the unit in which they are written at the JSON
boundary; `codesign.core.units` converts, nothing else does.
"""

import dataclasses
from typing import Any

import jax


def field(
  *,
  unit: str | None = None,
  static: bool = False,
  doc: str = '',
  default: Any = dataclasses.MISSING,
):
  """A dataclass field with codesign metadata.

  Args:
    unit: name of the boundary unit (a key of `codesign.core.units.UNITS`); the
      JSON key is `<name>_<unit>` and the value inside is SI.
    static: True for metadata that is not a pytree leaf.
    doc: one line that says what the field is.
    default: the value (SI) of a key left out of a JSON file, so that
      files written before the field existed still load; none: required.
  """
  return dataclasses.field(
    default=default, metadata={'unit': unit, 'static': static, 'doc': doc}
  )


def dataclass(cls):
  """Makes `cls` a frozen dataclass registered as a JAX pytree."""
  cls = dataclasses.dataclass(frozen=True)(cls)
  data, meta = [], []
  for f in dataclasses.fields(cls):
    (meta if f.metadata.get('static') else data).append(f.name)
  jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)
  return cls


def replace(obj: Any, **changes) -> Any:
  """`dataclasses.replace` under a shorter name."""
  return dataclasses.replace(obj, **changes)
