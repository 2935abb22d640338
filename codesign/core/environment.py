"""The environment variables of JAX, XLA and matplotlib a script reads,
checked when it starts: a bad one is one sentence naming the variable
and its valid values (`InputError`), not a traceback, an abort or a
run lost after its work.

- `JAX_ENABLE_X64`: a truth value (`check_before_jax`; JAX raises at its
  import otherwise);
- `MPLBACKEND`: a backend matplotlib has (`check_before_jax`; matplotlib
  raises at its import, after the work, otherwise);
- `XLA_FLAGS`: flags XLA knows with values it reads (`check_xla_flags`:
  XLA ends the process with exit status 1 when its backend starts
  otherwise). XLA has no way to ask, so the flags are parsed by XLA in a
  child process (about 0.4 s), unless they are the scripts' own
  (`xla_options.SCRIPT_XLA_FLAGS`) or were checked already by this
  process or its parent (`CHECKED_VAR`);
- `JAX_PLATFORMS`: backends this machine can start (`check_platforms`,
  once JAX is loaded: JAX ends in a bare AssertionError otherwise).
The compile cache's directory is checked by `compile_cache.resolve`.
"""

import hashlib
import os
import re
import subprocess
import sys

from codesign.core.errors import InputError, printable

# JAX's truth values (jax._src.config.bool_env).
TRUE = ('y', 'yes', 't', 'true', 'on', '1')
FALSE = ('n', 'no', 'f', 'false', 'off', '0')
# XLA_FLAGS already parsed by XLA in this process or its parent.
CHECKED_VAR = 'CODESIGN_XLA_FLAGS_CHECKED'
_PARSE = 'import jaxlib._jax as j; j.CompileOptions()'
_REASONS = (
  r'Unknown flags? in XLA_FLAGS: (.*)',
  r"Couldn't interpret value (.*)",
  r'Could not open file "(.*?)" to read flags',
)


def _shown(value: str) -> str:
  return repr(printable(value[:80]) + ('...' if len(value) > 80 else ''))


def check_before_jax() -> None:
  """JAX_ENABLE_X64 and MPLBACKEND, before JAX or matplotlib load.

  Raises:
    InputError: naming the variable and its valid values.
  """
  x64 = os.environ.get('JAX_ENABLE_X64')
  if x64 is not None and x64.strip().lower() not in TRUE + FALSE:
    raise InputError(
      f'JAX_ENABLE_X64 is {_shown(x64)}; valid: true or false (also '
      f'{"/".join(TRUE[:3])} or {"/".join(FALSE[:3])}, 1 or 0), or unset'
    )
  _check_mplbackend(os.environ.get('MPLBACKEND'))


def _check_mplbackend(value: str | None) -> None:
  if not value:
    return
  if value.startswith('module://'):
    import importlib.util

    name = value[len('module://') :]
    try:
      found = bool(name) and importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
      found = False
    if found:
      return
    names = []
  else:
    names = _mpl_backends()
    if value.lower() in names:
      return
  raise InputError(
    f'MPLBACKEND is {_shown(value)}, which matplotlib does not have; valid: '
    + (', '.join(names) + ', ' if names else '')
    + 'module://<an importable module>, or unset (the scripts draw with agg)'
  )


def _mpl_backends() -> list[str]:
  """matplotlib's backend names, read with MPLBACKEND out of the way
  (matplotlib refuses to load under a bad one)."""
  saved = os.environ.pop('MPLBACKEND', None)
  try:
    from matplotlib.backends import backend_registry

    return list(backend_registry.list_all())
  finally:
    if saved is not None:
      os.environ['MPLBACKEND'] = saved


def _digest(flags: str) -> str:
  from importlib import metadata

  try:
    version = metadata.version('jaxlib')
  except metadata.PackageNotFoundError:
    version = '?'
  return hashlib.sha256(f'{version}\0{flags}'.encode()).hexdigest()[:24]


def check_xla_flags(own: tuple[str, ...] = ()) -> None:
  """XLA_FLAGS as XLA parses them, before JAX starts its backend; `own`:
  flags known good (the scripts' own), which need no check.

  Raises:
    InputError: an unknown flag or a value XLA cannot read.
  """
  flags = os.environ.get('XLA_FLAGS', '')
  if not flags.strip() or set(flags.split()) <= set(own):
    return
  digest = _digest(flags)
  if os.environ.get(CHECKED_VAR) == digest:
    return
  try:
    proc = subprocess.run(
      [sys.executable, '-c', _PARSE],
      capture_output=True,
      text=True,
      errors='replace',
      timeout=120,
      stdin=subprocess.DEVNULL,
    )
  except (OSError, subprocess.SubprocessError):
    return  # not checked here; XLA will say it
  if proc.returncode == 0:
    os.environ[CHECKED_VAR] = digest
    return
  raise InputError(
    f'XLA_FLAGS holds what XLA refuses ({_reason(proc.stderr)}); valid: '
    'space-separated --xla_name=value flags that XLA knows, or unset'
  )


def _reason(stderr: str) -> str:
  for pattern in _REASONS:
    found = re.search(pattern, stderr)
    if found:
      what = found.group(0).rstrip('.')
      return printable(what[:160])
  return f'exit status of its parser: {stderr.strip()[-120:]!r}'


def check_platforms() -> None:
  """JAX_PLATFORMS names backends this machine can start (JAX loaded,
  XLA_FLAGS checked).

  Raises:
    InputError: naming the variable and the backend that cannot start.
  """
  value = os.environ.get('JAX_PLATFORMS')
  if not value:
    return
  import jax

  try:
    jax.devices()
  except Exception as e:  # noqa: BLE001  JAX's AssertionError, RuntimeError
    why = ' '.join(str(e).split())[:160] or type(e).__name__
    raise InputError(
      f'JAX_PLATFORMS is {_shown(value)}, which cannot start on this machine '
      f'({why}); valid: a comma-separated list of backends this machine has '
      '(cpu is always one), or unset'
    ) from None


def start_backend() -> None:
  """Starts JAX's backend (what the first computation would do), so that
  the address space it takes is known before any work."""
  import jax

  jax.devices()
