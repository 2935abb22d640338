"""The one error type shown to people, and the way scripts report it."""

import sys


class InputError(ValueError):
  """Bad user input. Its message is one sentence that names the problem."""


def exit_with(error: Exception) -> None:
  """Prints `error` as one line on stderr and exits with status 2."""
  print(f'error: {error}', file=sys.stderr)
  sys.exit(2)
