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
    default: the value when left out (a JSON file may then omit the key);
      hashable (a tuple, not a list).
  """
  return dataclasses.field(
    default=default, metadata={'unit': unit, 'static': static, 'doc': doc}
  )


def dataclass(cls):
  """Makes `cls` a frozen dataclass registered as a JAX pytree. A field
  called `sources` (field -> source pairs) is kept sorted by field name
  (`canonical_sources`)."""
  if 'sources' in cls.__annotations__:
    assert not hasattr(cls, '__post_init__'), cls
    cls.__post_init__ = _sort_sources
  cls = dataclasses.dataclass(frozen=True)(cls)
  data, meta = [], []
  for f in dataclasses.fields(cls):
    (meta if f.metadata.get('static') else data).append(f.name)
  jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)
  return cls


def canonical_sources(sources):
  """field -> source pairs sorted by field, one per field (the last given
  wins, as in a dict): the order a JSON file gives them back in (written
  with sorted keys), so that an object read back from a run's config
  equals the one the run built, and so do the keys of its compiled
  programs (a stack from config.json had its sources in another order:
  every search program compiled again). Remembered by value
  (`_CANONICAL`)."""
  try:
    return _CANONICAL[sources]
  except (KeyError, TypeError):  # new, or unhashable (not pairs)
    pass
  if isinstance(sources, tuple) and all(
    isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str)
    for x in sources
  ):
    out = tuple(sorted(dict(sources).items()))
    if len(_CANONICAL) >= _CANONICAL_MAX:
      _CANONICAL.clear()
    try:
      _CANONICAL[sources] = out
    except TypeError:  # a source that is not hashable: sorted, not kept
      pass
    return out
  return sources  # not pairs: the type checks name the problem


# The sorted pairs of source tuples seen before: a platform build makes
# about ten parts from the catalog's sources, each sorted again (measured:
# 49,000 sorts in a default propose, 5 us each; a lookup is 0.5 us).
_CANONICAL: dict[tuple, tuple] = {}
_CANONICAL_MAX = 1 << 14


def _sort_sources(self) -> None:
  object.__setattr__(self, 'sources', canonical_sources(self.sources))


def replace(obj: Any, **changes) -> Any:
  """`dataclasses.replace` under a shorter name."""
  return dataclasses.replace(obj, **changes)
