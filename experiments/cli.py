"""The `codesign` command that `pip install .` puts on the PATH.

  codesign evaluate --workload=zion_scale --platform=zion
  codesign propose --help
  codesign --help

`codesign COMMAND [flags]` runs `python -m experiments.COMMAND [flags]`
in this process, the same script with the same flags, outputs and exit
status (it is run as `__main__`, as `-m` runs it). The `experiments`
package is installed beside `codesign`, so the command works from any
directory. `python -m experiments COMMAND` is the same from a checkout.
"""

import ast
import importlib.util
import os
import runpy
import sys

from experiments import early, signals, streams

# The scripts a user runs (doc_numbers checks this checkout's docs and
# stays a `python -m` script of the checkout).
COMMANDS = (
  'evaluate',
  'propose',
  'scale_out',
  'compare_platforms',
  'sensitivity',
  'pareto',
  'growth',
  'search_quality',
  'zion_decision',
  'calibrate',
  'benchmark',
  'export',
  'import_torchrec',
  'fuzz',
)
_HELP = ('-h', '--help', '-help', 'help')


def summary(command: str) -> str:
  """The first sentence of a command's module docstring (read without
  importing it: importing a script defines its flags)."""
  origin = importlib.util.find_spec(f'experiments.{command}').origin
  with open(origin, encoding='utf-8') as f:
    doc = ast.get_docstring(ast.parse(f.read())) or ''
  first = ' '.join(doc.split('\n\n')[0].split())
  for end in ('? ', '. '):
    if end in first:
      first = first[: first.index(end) + 1]
  return first


def usage() -> str:
  """What `codesign --help` prints: the commands and what each does."""
  width = max(map(len, COMMANDS))
  lines = [
    'usage: codesign COMMAND [flags]',
    '',
    'Designs training hardware for DLRMs. Each command runs the script',
    'experiments/COMMAND.py, as `python -m experiments.COMMAND` does in a',
    'checkout; `codesign COMMAND --help` lists its flags.',
    '',
    'commands:',
  ]
  lines += [f'  {c:<{width}}  {summary(c)}' for c in COMMANDS]
  return '\n'.join(lines)


def _refuse(sentence: str) -> None:
  print(f'error: {sentence}', file=sys.stderr)
  sys.exit(2)


def main(argv: list[str] | None = None) -> None:
  """Runs `codesign COMMAND [flags]` (`argv`: the command and its flags,
  default `sys.argv[1:]`)."""
  streams.guard()  # closed or broken streams, as under `python -m`
  args = list(sys.argv[1:] if argv is None else argv)
  if not args:
    _refuse('give a command: codesign COMMAND [flags] (codesign --help)')
  command, flags = args[0], args[1:]
  if command in _HELP:
    try:
      print(usage(), flush=True)
    except BrokenPipeError:  # `codesign --help | head`: no traceback
      os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return
  if command == '--version':
    from codesign import __version__

    print(f'codesign {__version__}')
    return
  if command not in COMMANDS:
    shown = ''.join(c if c.isprintable() else '?' for c in command[:80])
    _refuse(
      f'unknown command {shown!r}; the commands are {", ".join(COMMANDS)} '
      '(codesign --help)'
    )
  signals.install()  # Ctrl-C, as `python -m experiments.X` has it
  early.refuse_if_in_use(flags)
  sys.argv = ['codesign', *flags]  # argv[0]: the script's path (runpy)
  runpy.run_module(
    f'experiments.{command}', run_name='__main__', alter_sys=True
  )
