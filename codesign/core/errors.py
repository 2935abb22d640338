"""The one error type shown to people, the way scripts report it, and how
names from input files are made safe to print."""

import sys
import unicodedata


class InputError(ValueError):
  """Bad user input. Its message is one sentence that names the problem."""


# Characters that change a terminal or a line instead of showing: bidi
# overrides and isolates, line and paragraph separators.
_INVISIBLE = frozenset('\u200e\u200f\u2028\u2029') | frozenset(
  chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
)


def _escape(c: str) -> str:
  n = ord(c)
  return f'\\x{n:02x}' if n < 0x100 else f'\\u{n:04x}'


def _unsafe(c: str, keep: str) -> bool:
  if c in keep or c.isprintable() and c not in _INVISIBLE:
    return False
  return unicodedata.category(c) in ('Cc', 'Cs') or c in _INVISIBLE


def printable(text: str, keep: str = '') -> str:
  """`text` with control characters (ESC, BEL, CR, newline, DEL, C1),
  lone surrogates and bidi overrides escaped as `\\x1b`, `\\udc80`, ...;
  characters in `keep` (e.g. a newline in a table) are left as they are.
  Names come from input files: printed raw, one could retitle or clear a
  terminal, or fail to encode after a whole run."""
  if text.isprintable() and not _INVISIBLE.intersection(text):
    return text
  return ''.join(_escape(c) if _unsafe(c, keep) else c for c in text)


def exit_with(error: Exception) -> None:
  """Prints `error` as one line on stderr and exits with status 2."""
  print(f'error: {printable(str(error))}', file=sys.stderr)
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
