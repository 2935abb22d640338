"""The one error type shown to people, and the way scripts report it."""

import sys


class InputError(ValueError):
  """Bad user input. Its message is one sentence that names the problem."""


def exit_with(error: Exception) -> None:
  """Prints `error` as one line on stderr and exits with status 2."""
  print(f'error: {error}', file=sys.stderr)
  sys.exit(2)


def raise_problems(
  problems: list[str], label: str | None = None, what: str = 'input'
) -> None:
  """Raises one `InputError` that names every problem in `problems`.

  One problem is its own sentence (after `label: ` when a label, such as
  a file name, is given); several read `label has N problems: a; b; c`
  (`what` stands in for a missing label). No problems: returns.
  """
  if not problems:
    return
  if len(problems) == 1:
    prefix = f'{label}: ' if label else ''
    raise InputError(prefix + problems[0])
  raise InputError(
    f'{label or what} has {len(problems)} problems: ' + '; '.join(problems)
  )
