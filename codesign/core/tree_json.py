"""A pytree's structure (a `jax.tree_util.PyTreeDef`) as JSON, read back
without running code: no pickle, no import.

The structure of a program's output (the search's optimizer states, a
`Platform` of gradients) is kept beside the program on disk
(`codesign.core.program_cache`). Each node is written as its type's name
and its auxiliary data; a type is found again only among the modules this
process has already imported (a name whose module is not loaded, or that
is not a class JAX registered as a pytree node, is refused), and the
auxiliary data holds only JSON's own values, floats (exactly, in hex),
tuples, lists and dicts of them. A structure that cannot be written so,
or that does not read back equal, raises `Unencodable`: the caller keeps
it in memory only.
"""

import sys

import jax
from jax.tree_util import PyTreeDef

_BUILTINS = {'tuple': tuple, 'list': list, 'dict': dict, 'None': type(None)}
_NAMES = {v: k for k, v in _BUILTINS.items()}
_LEAF = jax.tree.structure(0)


class Unencodable(ValueError):
  """A structure this format cannot hold, or a document that is not one."""


def dumps(tree: PyTreeDef):
  """`tree` as a JSON value; it reads back equal (checked here).

  Raises:
    Unencodable: a node's type or auxiliary data has no JSON form.
  """
  doc = _node(tree)
  if loads(doc) != tree:
    raise Unencodable(f'{tree} does not read back equal')
  return doc


def loads(doc) -> PyTreeDef:
  """The structure `dumps` wrote.

  Raises:
    Unencodable: `doc` is not one (a type not loaded or not a pytree
      node, malformed data).
  """
  try:
    return _tree(doc, 0)
  except Unencodable:
    raise
  except (TypeError, ValueError, KeyError, AttributeError, RuntimeError) as e:
    raise Unencodable(f'not a tree: {type(e).__name__}') from None


def _node(tree: PyTreeDef):
  data = tree.node_data()
  if data is None:
    return None  # a leaf
  kind, aux = data
  return {
    'type': _type_name(kind),
    'aux': _value(aux),
    'children': [_node(c) for c in tree.children()],
  }


def _type_name(kind: type) -> str:
  if kind in _NAMES:
    return _NAMES[kind]
  name = f'{kind.__module__}:{kind.__qualname__}'
  if '<locals>' in name or _find(name) is not kind:
    raise Unencodable(f'type {name} cannot be found by its name')
  return name


def _value(v):
  """Auxiliary data as typed JSON: ints, strings, bools and None as they
  are; floats, tuples, lists and dicts tagged."""
  if v is None or type(v) in (bool, int, str):
    return v
  if type(v) is float:
    return {'float': v.hex()}
  if type(v) in (tuple, list):
    return {type(v).__name__: [_value(x) for x in v]}
  if type(v) is dict:
    return {'dict': [[_value(k), _value(x)] for k, x in v.items()]}
  raise Unencodable(f'auxiliary data of type {type(v).__name__}')


def _unvalue(doc, depth: int):
  if depth > 100:
    raise Unencodable('auxiliary data nested too deep')
  if doc is None or type(doc) in (bool, int, str):
    return doc
  if type(doc) is not dict or len(doc) != 1:
    raise Unencodable('malformed auxiliary data')
  ((tag, body),) = doc.items()
  if tag == 'float':
    return float.fromhex(body)
  items = [_unvalue(x, depth + 1) if tag != 'dict' else tuple(x) for x in body]
  if tag == 'tuple':
    return tuple(items)
  if tag == 'list':
    return items
  if tag == 'dict':
    return {_unvalue(k, depth + 1): _unvalue(v, depth + 1) for k, v in items}
  raise Unencodable(f'unknown tag {tag!r}')


def _find(name: str):
  """The class `module:qualname` if its module is loaded, else None."""
  module, _, qualname = name.partition(':')
  obj = sys.modules.get(module)
  for part in qualname.split('.') if obj is not None else ():
    obj = getattr(obj, part, None)
  return obj if isinstance(obj, type) else None


def _tree(doc, depth: int) -> PyTreeDef:
  if depth > 200:
    raise Unencodable('tree nested too deep')
  if doc is None:
    return _LEAF
  if type(doc) is not dict or set(doc) != {'type', 'aux', 'children'}:
    raise Unencodable('malformed node')
  name = doc['type']
  kind = _BUILTINS.get(name) if type(name) is str else None
  if kind is None and type(name) is str:
    kind = _find(name)
  if kind is None:
    raise Unencodable(f'type {name!r} is not loaded')
  children = [_tree(c, depth + 1) for c in doc['children']]
  return PyTreeDef.from_node_data_and_children(
    jax.tree_util.default_registry, (kind, _unvalue(doc['aux'], 0)), children
  )
