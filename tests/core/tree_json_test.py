"""Pytree structures as JSON: read back equal, and a document names only
types already loaded and registered, so reading it runs no code."""

import dataclasses
import functools
import json
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
import pytest

from codesign.core import tree_json


class Point(NamedTuple):
  x: object
  y: object


def _round_trip(tree):
  doc = json.loads(json.dumps(tree_json.dumps(tree)))
  return tree_json.loads(doc)


def test_optimizer_states_and_containers_read_back_equal():
  params = {'a': jnp.zeros(3), 'b': (jnp.zeros(2), None), 'c': [1.0]}
  for obj in (
    optax.adam(0.1).init(params),
    Point(1.0, {2: None, 7: (3.0,)}),
    [None, (), {}],
    1.0,
  ):
    tree = jax.tree.structure(obj)
    assert _round_trip(tree) == tree


@functools.partial(
  jax.tree_util.register_dataclass, data_fields=['x'], meta_fields=['meta']
)
@dataclasses.dataclass(frozen=True)
class Tagged:
  x: object
  meta: object


def test_auxiliary_data_keeps_its_types():
  for meta in (None, True, 3, 0.1, 'a', (1, 2.5), ((1,), ('b', None))):
    tree = jax.tree.structure(Tagged(1.0, meta))
    back = _round_trip(tree)
    assert back == tree
    (aux,) = back.node_data()[1]
    assert aux == meta and type(aux) is type(meta)  # 3 stays an int


def test_unknown_or_unregistered_types_are_refused():
  good = tree_json.dumps(jax.tree.structure(Point(1, 2)))
  for name in (
    'os:system',  # not a class
    'no_such_module_codesign:Thing',  # never imported, never loaded
    'collections:Counter',  # a class, but not a pytree node
  ):
    with pytest.raises(tree_json.Unencodable):
      tree_json.loads(dict(good, type=name))


def test_malformed_documents_are_refused():
  for doc in (
    {'type': 'tuple'},
    {'type': 'tuple', 'aux': {'float': 5}, 'children': []},
    {'type': 'dict', 'aux': {'eval': 'x'}, 'children': []},
    [1, 2],
    'x',
  ):
    with pytest.raises(tree_json.Unencodable):
      tree_json.loads(doc)


def test_a_local_class_has_no_name_to_find():
  class Local(NamedTuple):
    a: object

  with pytest.raises(tree_json.Unencodable):
    tree_json.dumps(jax.tree.structure(Local(1)))
