"""Hand-built inputs checked against their declared types.

`problems(obj, cls, where)` lists, one sentence each, every field of a
`Workload`, `Platform` (and its parts), `Plan` or `Stack` built in Python
whose value is not of the field's type: a string for a number, a dict for
a `Table`, a part left None, a string where a tuple is expected, a number
that is not finite or too large to hold. The loaders check the same of
JSON (`codesign.schema`); the objects' own checks (`workload.problems`,
...) then check ranges, so that a hand-built object is refused exactly as
the same JSON would be.
"""

import dataclasses
import functools
import math
import numbers
import typing

import numpy as np

from codesign.core.errors import InputError, printable
from codesign.core.safe_json import MAX_INT_DIGITS


def _show(value) -> str:
  text = printable(repr(value))
  return text if len(text) <= 40 else text[:37] + '...'


def _number(value, where: str) -> list[str]:
  """Problems of a value that should be a real number (or a numeric
  array, as jax leaves are)."""
  if isinstance(value, bool | np.bool_):
    return [f'{where} must be a number, got {_show(value)}']
  if isinstance(value, numbers.Integral) and (
    abs(int(value)) >= 10**MAX_INT_DIGITS
  ):
    return [f'{where} must have at most {MAX_INT_DIGITS} digits']
  if isinstance(value, numbers.Real):
    ok = math.isfinite(value)
  elif hasattr(value, 'dtype') and hasattr(value, 'shape'):
    arr = np.asarray(value)
    if not np.issubdtype(arr.dtype, np.number) or arr.dtype.kind == 'c':
      return [f'{where} must hold numbers, got dtype {arr.dtype}']
    ok = bool(np.all(np.isfinite(arr)))
  else:
    return [f'{where} must be a number, got {_show(value)}']
  return [] if ok else [f'{where} must be finite, got {_show(value)}']


def _value(value, tp, where: str) -> list[str]:
  if isinstance(tp, type) and dataclasses.is_dataclass(tp):
    return problems(value, tp, where)
  item = _tuple_item(tp)
  if item is not None:
    if not isinstance(value, tuple):  # a list: unhashable as a jit key
      return [f'{where} must be a tuple, got {_show(value)}']
    out = []
    for i, x in enumerate(value):
      out += _value(x, item, f'{where}.{i}')
    return out
  if tp is str:
    ok = isinstance(value, str)
    return [] if ok else [f'{where} must be a string, got {_show(value)}']
  if tp is bool:
    ok = isinstance(value, bool | np.bool_)
    return [] if ok else [f'{where} must be True or False, got {_show(value)}']
  if tp in (int, float, np.ndarray):
    if tp is np.ndarray and isinstance(value, list | tuple):
      value = np.asarray(value) if _all_real(value) else value
    out = _number(value, where)
    if out or tp is np.ndarray:
      return out
    if np.ndim(value) != 0:
      return [
        f'{where} must be a number, got an array of shape {np.shape(value)}'
      ]
    if tp is int and not _integral(value):
      return [f'{where} must be an integer, got {_show(value)}']
  return []


def _integral(value) -> bool:
  """Whether a finite number is a whole number (2, 2.0; not 2.9999), as
  the command line and the JSON loaders take an integer."""
  return float(np.asarray(value)).is_integer()


def _all_real(values) -> bool:
  return all(
    isinstance(x, numbers.Real) and not isinstance(x, bool) for x in values
  )


def _tuple_item(tp):
  if typing.get_origin(tp) is tuple:
    args = typing.get_args(tp)
    if len(args) == 2 and args[1] is Ellipsis:
      return args[0]
  return None


def problems(obj, cls, where: str) -> list[str]:
  """Every field of `obj` (which must be a `cls`) whose value is not of its
  declared type, one sentence each (see the module docstring)."""
  if not isinstance(obj, cls):
    return [f'{where} must be of type {cls.__name__}, got {_show(obj)}']
  hints = _hints(cls)
  out = []
  for f in dataclasses.fields(cls):
    if f.name == 'sources':
      continue
    value = getattr(obj, f.name)
    here = f'{where}.{f.name}'
    if value is None:
      if f.default is not None:
        out.append(f'{here} must be given, got None')
      continue
    out += _value(value, hints[f.name], here)
  return out


@functools.cache
def _hints(cls) -> dict:
  """The declared field types of dataclass `cls`, read once (typing's
  reading resolves every annotation anew: about 4 ms of each
  `codesign.evaluate`)."""
  return typing.get_type_hints(cls)


def normalized(obj, cls):
  """`obj` (of `cls`, whose `problems` are none) with the values the
  loaders would have made: a list or tuple of numbers for an array field
  as a float64 array, a whole number for an integer field as an int."""
  hints = _hints(cls)
  changes = {}
  for f in dataclasses.fields(cls):
    value = getattr(obj, f.name)
    if f.name != 'sources' and value is not None:
      new = _normal(value, hints[f.name])
      if new is not value:
        changes[f.name] = new
  return dataclasses.replace(obj, **changes) if changes else obj


def _normal(value, tp):
  if isinstance(tp, type) and dataclasses.is_dataclass(tp):
    return normalized(value, tp)
  item = _tuple_item(tp)
  if item is not None:
    new = tuple(_normal(x, item) for x in value)
    return value if all(a is b for a, b in zip(new, value)) else new
  if tp is np.ndarray and isinstance(value, list | tuple):
    return np.asarray(value, np.float64)
  if tp is int and type(value) is not int:
    return int(float(np.asarray(value)))
  return value


# ---- arguments of the Python API ------------------------------------------
# Each raises `InputError` with one sentence, as the command line refuses
# the same value of the flag of that name.


def count(name: str, value, lo: int = 1) -> int:
  """An integer argument of at least `lo` (not a bool, not 2.5)."""
  if isinstance(value, bool | np.bool_) or not isinstance(
    value, numbers.Integral
  ):
    raise InputError(f'{name} must be an integer, got {_show(value)}')
  if value < lo:
    raise InputError(f'{name} must be at least {lo}, got {int(value)}')
  if abs(int(value)) >= 10**MAX_INT_DIGITS:
    raise InputError(f'{name} must have at most {MAX_INT_DIGITS} digits')
  return int(value)


def real(name: str, value, none: bool = False, positive: bool = False):
  """A finite, non-negative number argument (positive with `positive`;
  None allowed with `none`)."""
  if value is None and none:
    return None
  if problem := _number(value, name):
    raise InputError(problem[0])
  x = float(np.asarray(value))
  if x < 0 or (positive and x == 0):
    word = 'positive' if positive else 'non-negative'
    raise InputError(f'{name} must be {word}, got {x:g}')
  return x


def flag(name: str, value) -> bool:
  """A True/False argument (not the string 'no')."""
  if not isinstance(value, bool | np.bool_):
    raise InputError(f'{name} must be True or False, got {_show(value)}')
  return bool(value)


def names(name: str, value) -> tuple[str, ...]:
  """A tuple or list of strings (a lone string is refused: it would be
  read letter by letter)."""
  if isinstance(value, str) or not isinstance(value, tuple | list):
    raise InputError(
      f'{name} must be a tuple or list of strings, got {_show(value)}'
    )
  bad = [x for x in value if not isinstance(x, str)]
  if bad:
    raise InputError(f'{name} must hold strings only, got {_show(bad[0])}')
  return tuple(value)


def choice(name: str, value, choices) -> str:
  """One of `choices` (strings)."""
  if not isinstance(value, str) or value not in choices:
    raise InputError(
      f'{name} must be one of {", ".join(choices)}, got {_show(value)}'
    )
  return value
