"""absl's flag parsing for every script, with a bad flag value ending in
one sentence on stderr and exit status 2 (no traceback), and the same
error path for the work of a script that does not take
experiments.common's flags (export, doc_numbers): defines no flags."""

from absl import flags

from codesign.core.errors import InputError, exit_with


def parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing, with a bad flag value ending in one sentence."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    exit_with(InputError(' '.join(str(e).split())))


def as_input_error(e: BaseException, lower: str) -> InputError | None:
  """The one sentence a failure of a script's work ends in: bad input,
  an OS failure (a read-only or full folder) or a lack of memory
  (`lower`: what to lower); None for anything else (a bug: raised)."""
  from codesign.core import memory

  if isinstance(e, InputError):
    return e
  if isinstance(e, OSError):
    name = f'{e.filename}: ' if e.filename else ''
    return InputError(f'{name}{e.strerror or e}')
  if isinstance(e, Exception) and memory.is_out_of_memory(e):
    return memory.out_of_memory(e, lower)
  return None


def guarded(fn, *args, lower: str = 'the sizes of the inputs'):
  """`fn(*args)` after the environment's checks, with a failure ending
  as `as_input_error` says: one sentence and exit status 2."""
  from codesign.core import environment, memory

  try:
    environment.check_before_jax()
    memory.check_address_space()
    return fn(*args)
  except Exception as e:
    error = as_input_error(e, lower)
    if error is None:
      raise
    exit_with(error)
