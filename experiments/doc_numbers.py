r"""Recompute the figures README.md and WORKSPACE.md quote from runs.

  python -m experiments.doc_numbers            # check (the default)
  python -m experiments.doc_numbers --write    # rewrite the stale ones
  python -m experiments.doc_numbers --include_slow  # propose's too

Each figure of `codesign.boundary.doc_numbers.FIGURES` is recomputed by
its command (evaluate in-process through `codesign.api`, the same result
as the script's result.json; other scripts as a subprocess into a
temporary workdir) and compared with the document. Prints a table (file,
figure in the document, figure now, command); with stale figures the
check ends with exit status 1 and names them, and `--write` replaces them
in place (each file written whole, atomically). A figure whose anchor
text is gone ends in one sentence and exit status 2.
"""

import functools
import json
import logging
import pathlib
import subprocess
import sys
import tempfile

from absl import app, flags

from codesign.core.errors import InputError, exit_with
from experiments.flag_parsing import parse_flags

flags.DEFINE_bool(
  'check',
  True,
  'Recompute every figure and compare (the default): exit status 1 when '
  'any is stale. --write replaces the check.',
)
flags.DEFINE_bool(
  'write',
  False,
  'Rewrite the stale figures in place (each file written whole, atomically).',
)
flags.DEFINE_bool(
  'include_slow',
  False,
  "Also the figures of runs of minutes (propose's defaults).",
)
flags.DEFINE_string(
  'docs_dir',
  str(pathlib.Path(__file__).resolve().parent.parent),
  'Folder that holds README.md and WORKSPACE.md (default: this checkout).',
)
flags.DEFINE_bool(
  'quiet',
  False,
  'Print the results only (stdout): no progress lines on stderr.',
)
FLAGS = flags.FLAGS


@functools.cache
def _reporter():
  """The script's progress on stderr (`experiments.progress`)."""
  from experiments import progress

  return progress.Reporter(quiet=FLAGS.quiet)


def _progress(line: str) -> None:
  _reporter()(line)


def run_in_process(run) -> dict:
  """The result of an evaluate run, through `codesign.api`."""
  from codesign import api
  from codesign.boundary import inputs

  w, p, plan, s = inputs.resolve(
    run.flag('workload', 'criteo_kaggle'),
    run.flag('platform', 'big_basin'),
    run.flag('plan', 'auto'),
    run.values('override'),
    stack=run.flag('stack'),
  )
  return api.evaluate(w, p, s, plan, x64=True)


def run_subprocess(run) -> dict:
  """The result.json of `run` as a subprocess in a temporary workdir."""
  from codesign.boundary import doc_numbers

  with tempfile.TemporaryDirectory() as tmp:
    workdir = pathlib.Path(tmp) / 'run'
    _progress(f'running {doc_numbers.command(run)}')
    done = subprocess.run(
      [sys.executable, *doc_numbers.arguments(run), f'--workdir={workdir}'],
      cwd=pathlib.Path(__file__).resolve().parent.parent,
      capture_output=True,
      text=True,
    )
    if done.returncode != 0:
      last = (done.stderr.strip().splitlines() or ['no output'])[-1]
      raise InputError(f'{doc_numbers.command(run)} failed: {last}')
    return json.loads((workdir / 'result.json').read_text())


def result_of(run) -> dict:
  if run.script == 'evaluate':
    return run_in_process(run)
  return run_subprocess(run)


def read_docs(figures) -> dict[str, str]:
  root = pathlib.Path(FLAGS.docs_dir)
  docs = {}
  for name in sorted({f.file for f in figures}):
    path = root / name
    if not path.is_file():
      raise InputError(f'{path} does not exist; give --docs_dir')
    docs[name] = path.read_text()
  return docs


def write_docs(docs: dict[str, str], table) -> list[str]:
  """Rewrites the files with stale figures; returns their names."""
  from codesign.boundary import doc_numbers
  from codesign.core import results

  written = []
  for name, text in docs.items():
    new = doc_numbers.rewritten(text, name, table)
    if new != text:
      results.write_text_atomic(pathlib.Path(FLAGS.docs_dir) / name, new)
      written.append(name)
  return written


def main(argv):
  logging.getLogger('jax._src.xla_bridge').setLevel(logging.WARNING)
  import jax  # here: a bad flag ends before jax loads

  jax.config.update('jax_enable_x64', True)
  from codesign.boundary import doc_numbers

  try:
    if len(argv) > 1:
      raise InputError(f'unexpected arguments: {" ".join(argv[1:])}')
    if not (FLAGS.check or FLAGS.write):
      raise InputError('--nocheck without --write does nothing; give one')
    figures = doc_numbers.selected(doc_numbers.FIGURES, FLAGS.include_slow)
    docs = read_docs(figures)
    for f in figures:  # anchors first: a moved one fails before any run
      doc_numbers.locate(docs[f.file], f)
    results = {r: result_of(r) for r in doc_numbers.runs(figures)}
    table = doc_numbers.rows(figures, docs, results)
  except InputError as e:
    exit_with(e)
  print(doc_numbers.table(table))
  stale = [r for r in table if r.stale]
  if FLAGS.write:
    for name in write_docs(docs, table):
      print(f'wrote {name}')
  elif stale:
    print(
      f'{len(stale)} stale: '
      + '; '.join(f'{r.figure.file} {r.in_doc} -> {r.now}' for r in stale)
    )
    sys.exit(1)


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
