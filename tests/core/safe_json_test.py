"""JSON that people give, held to what the model can hold
(`codesign.core.safe_json`, and through `codesign.boundary.inputs`):
every failure is one sentence that names the file and the limit."""

import errno
import os
import pathlib

import pytest

from codesign.boundary import inputs
from codesign.core import results, safe_json
from codesign.core.errors import InputError


def _refused(path, match: str) -> str:
  with pytest.raises(InputError, match=match) as e:
    safe_json.read(path, 'workload')
  assert '\n' not in str(e.value)
  return str(e.value)


@pytest.mark.parametrize('digits', [20, 400, 5000, 100_000])
def test_a_long_integer_is_refused_with_the_limit(tmp_path, digits):
  f = tmp_path / 'w.json'
  f.write_text('{"rows": -' + '9' * digits + '}')
  message = _refused(f, f'integer of {digits} digits')
  assert f'limited to {safe_json.MAX_INT_DIGITS} digits' in message


def test_the_largest_counts_are_held(tmp_path):
  f = tmp_path / 'w.json'
  f.write_text('{"rows": 9223372036854775807, "x": 1e400}')
  assert safe_json.read(f, 'workload')['rows'] == 2**63 - 1


def test_deep_nesting_is_refused_before_parsing(tmp_path):
  f = tmp_path / 'w.json'
  f.write_text('[' * 100_000 + ']' * 100_000)
  message = _refused(f, 'nests 100000 levels deep')
  assert f'limited to {safe_json.MAX_DEPTH} levels' in message
  # Brackets inside strings do not count.
  f.write_text('{"name": "' + '[{' * 1000 + '"}')
  assert safe_json.read(f, 'workload')['name'] == '[{' * 1000


def test_a_duplicate_key_is_refused_naming_it(tmp_path):
  f = tmp_path / 'w.json'
  f.write_text('{"a": {"global_batch": 1, "global_batch": 2}}')
  _refused(f, "the key 'global_batch' twice")


def test_what_is_not_a_file_is_named(tmp_path):
  _refused(tmp_path, 'is a directory, not a JSON file')
  fifo = tmp_path / 'fifo'
  os.mkfifo(fifo)
  _refused(fifo, 'is a FIFO, not a JSON file')  # and never opened
  _refused(tmp_path / 'missing.json', 'does not exist')
  _refused(tmp_path / 'missing' / 'w.json', 'does not exist')


def test_an_unreadable_file_is_named(tmp_path, monkeypatch):
  f = tmp_path / 'w.json'
  f.write_text('{}')

  def denied(self):
    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

  monkeypatch.setattr(pathlib.Path, 'read_bytes', denied)
  _refused(f, r'cannot be read \(Permission denied\)')


def test_an_override_is_held_as_a_file_is():
  for text, match in (
    ('workload.global_batch=' + '1' * 500, 'integer of 500 digits'),
    ('workload.top_mlp=' + '[' * 5000 + ']' * 5000, 'nests 5000 levels'),
    ('workload.x={"a": 1, "a": 2}', "the key 'a' twice"),
  ):
    with pytest.raises(InputError, match=match):
      inputs.split_overrides([text])
  # Not JSON: the text itself, as before.
  assert inputs.split_overrides(['workload.name=abc'])['workload'] == [
    (['name'], 'abc')
  ]


def test_too_many_tables_are_refused_before_any_work(tmp_path):
  f = tmp_path / 'w.json'
  table = '{"rows": 10, "dim": 4, "pooling": 1}'
  f.write_text('{"tables": [' + ','.join([table] * 100_001) + ']}')
  with pytest.raises(InputError, match=r'in \[1, 100000\], got 100001'):
    inputs.load_workload(str(f))


def test_a_full_disk_is_one_sentence_and_no_partial_file(tmp_path, monkeypatch):
  def full(fd, *args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

  monkeypatch.setattr(results.os, 'fdopen', full)
  with pytest.raises(InputError, match=r'No space left on device'):
    results.write_json(tmp_path / 'result.json', {'a': 1})
  assert list(tmp_path.iterdir()) == []
