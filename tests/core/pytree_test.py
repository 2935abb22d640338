"""`pytree.canonical_sources`: field -> source pairs sorted by field, the
last given winning, the same answer from its memory as from a fresh
sort, and anything that is not pairs of a name and a source returned as
given (the type checks name the problem)."""

from codesign.core import pytree


def test_pairs_are_sorted_by_field_and_the_last_wins():
  pairs = (('b', 'x'), ('a', 'y'), ('b', 'z'))
  assert pytree.canonical_sources(pairs) == (('a', 'y'), ('b', 'z'))


def test_a_remembered_answer_is_a_fresh_sort():
  pairs = tuple((f'f{i}', f's{i}') for i in range(20))[::-1]
  first = pytree.canonical_sources(pairs)
  again = pytree.canonical_sources(tuple(list(pairs)))  # another object
  assert first == again == tuple(sorted(pairs))
  assert pytree.canonical_sources(first) == first


def test_pairs_with_an_unhashable_source_are_sorted_too():
  pairs = (('b', ['x']), ('a', ['y']))
  assert pytree.canonical_sources(pairs) == (('a', ['y']), ('b', ['x']))


def test_what_is_not_pairs_is_returned_as_given():
  for given in (
    [('a', 'x')],  # a list
    (('a', 'x', 'extra'),),
    ((1, 'x'),),
    ('ab', 'cd'),
    ((['a'], 'x'),),  # unhashable
    None,
  ):
    assert pytree.canonical_sources(given) is given
