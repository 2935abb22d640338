"""Named inputs and their resolution: presets or JSON files, `--override`,
a device profile, and the named plans.

Each of the four inputs (workload, platform, plan, stack) is a preset
name or a JSON file in the schema of `codesign.spec.schema`; a run's
config.json works too (its section of that name is used). `resolve`
loads them, applies the overrides (in the units of the JSON keys) and
returns the objects.

A workload, platform or stack file (or dict, `resolve_base`) may be
partial: `{"base": "dgx_h100", "nodes": 4, "nic": {"count": 4}}` is the
named preset (or another file, its path relative to this one's folder)
with those keys changed. Objects merge key by key, any other value (a
number, a list such as the tables) replaces the base's; the result is
checked as a whole file is, in the keys' units, and each changed number's
`sources` entry names the file that set it. The name stays the base's
unless the file sets `name`.
"""

import os
import pathlib

from codesign.core import safe_json
from codesign.core.errors import InputError, printable
from codesign.model import planner, terms
from codesign.spec import (
  catalog,
  platform_presets,
  schema,
  stack_presets,
  user_parts,
  workload_presets,
)


def read_json(path: str, what: str) -> dict:
  """Reads a JSON file; one-sentence errors for every way it can fail
  (`codesign.core.safe_json`)."""
  return safe_json.read(path, what)


def is_path(name: str) -> bool:
  """Whether an input names a JSON file rather than a preset."""
  return name.endswith('.json') or '/' in name


def _section(d, what: str):
  """The `what` section of a JSON object (a run's config.json holds all
  four inputs; accept it directly), else the object itself."""
  if isinstance(d, dict) and what in d and isinstance(d[what], dict):
    return d[what]
  return d


def _from_file(path: str, what: str, depth: int = 0) -> dict:
  """The `what` section of a JSON file with its base merged in
  (`resolve_base`) and its defaults written in."""
  d = _section(read_json(path, what), what)
  folder = os.path.dirname(os.path.abspath(path))
  d = resolve_base(d, what, printable(path), folder, depth)
  schema.check_table_count(what, d, printable(path))
  return schema.with_defaults(what, d)


# The key that names what a partial input changes; the sections that take it.
BASE_KEY = 'base'
BASED = ('workload', 'platform', 'stack')
# Bases of bases followed at most (a file that names itself is refused).
MAX_BASE_DEPTH = 8


def resolve_base(
  d, what: str, label: str | None = None, folder=None, depth: int = 0
):
  """`d` (a `what` JSON object) with its `base` merged in: the preset or
  file it names (a relative path from `folder`, default the current
  one), with `d`'s keys changed (`merge`). Anything without a `base` key
  comes back as it is.

  Raises:
    InputError: `base` is not a name, names an unknown preset or a file
      that cannot be read, or the bases nest deeper than
      `MAX_BASE_DEPTH` (a cycle).
  """
  if not isinstance(d, dict) or BASE_KEY not in d or what not in BASED:
    return d
  base, where = d[BASE_KEY], label or what
  if not isinstance(base, str) or not base.strip():
    raise InputError(
      f'{where}: "base" must name a {what} preset or a JSON file, got '
      f'{printable(repr(base))[:40]}'
    )
  if depth >= MAX_BASE_DEPTH:
    raise InputError(
      f'{where}: bases nest more than {MAX_BASE_DEPTH} deep (does a file '
      'name itself as its base?)'
    )
  if is_path(base):
    path = pathlib.Path(folder or '.') / base
    base_json = _from_file(str(path), what, depth + 1)
  else:
    base_json = _JSON[what](base)
  changes = {k: v for k, v in d.items() if k != BASE_KEY}
  note = f'{label or "user input"}: set over the base {printable(base)}'
  return merge(schema.SECTIONS[what], base_json, changes, note)


def merge(cls, base: dict, changes: dict, note: str) -> dict:
  """A copy of `base` (a JSON object of dataclass `cls`) with `changes`:
  an object merged into an object key by key, any other value replacing
  the base's. Each changed field's `sources` entry (where the object has
  them) reads `note`. Unknown keys are kept, for the schema to name."""
  out = dict(base)
  fields = schema.json_fields(cls)
  for key, value in changes.items():
    f, tp = fields.get(key, (None, None))
    old = out.get(key)
    if key == 'sources' and isinstance(old, dict) and isinstance(value, dict):
      out[key] = {**old, **value}
      continue
    if f is not None and isinstance(old, dict) and isinstance(value, dict):
      out[key] = merge(tp, old, value, note) if tp else {**old, **value}
      continue
    out[key] = value
    if f is not None and isinstance(out.get('sources'), dict):
      out['sources'] = {**out['sources'], f.name: note}
  return out


def workload_json(name_or_path: str) -> dict:
  """The JSON of a workload preset or file."""
  if is_path(name_or_path):
    return _from_file(name_or_path, 'workload')
  return schema.workload_to_json(workload_presets.get(name_or_path))


def stack_json(name_or_path: str) -> dict:
  """The JSON of a stack preset or file."""
  if is_path(name_or_path):
    return _from_file(name_or_path, 'stack')
  return schema.stack_to_json(stack_presets.get(name_or_path))


def platform_json(name_or_path: str) -> dict:
  """The JSON of a platform preset or file."""
  if is_path(name_or_path):
    return _from_file(name_or_path, 'platform')
  return schema.platform_to_json(platform_presets.get(name_or_path))


# The JSON of a preset of each section that takes a base.
_JSON = {
  'workload': lambda name: schema.workload_to_json(workload_presets.get(name)),
  'platform': lambda name: schema.platform_to_json(platform_presets.get(name)),
  'stack': lambda name: schema.stack_to_json(stack_presets.get(name)),
}


def load_catalog(source) -> catalog.UserParts:
  """A user's parts (`codesign.spec.user_parts`) from a parts JSON file
  or dict (`--catalog`); () for None or ''. Raises `InputError` naming
  every problem of the file."""
  if source is None or source == '':
    return ()
  if isinstance(source, dict):
    return user_parts.load(source)
  if isinstance(source, os.PathLike):
    source = os.fspath(source)
  if not isinstance(source, str):
    raise InputError(
      'catalog must be a parts JSON file path or dict, got '
      f'{type(source).__name__}'
    )
  return user_parts.load(read_json(source, 'parts'), printable(source))


def _parse_value(text: str, key: str):
  """An override's value: JSON (bounded as files are), or else the text."""
  try:
    return safe_json.loads(text, f'override {printable(key)}')
  except safe_json.NotJson:
    return text


def apply_override(tree: dict, path: list[str], value, where: str):
  """Sets `tree[path]` in place; lists take an index or broadcast a scalar."""
  node = tree
  for i, part in enumerate(path):
    last = i == len(path) - 1
    here = '.'.join([where] + path[: i + 1])
    if isinstance(node, list):
      if not part.isdigit() or int(part) >= len(node):
        raise InputError(
          f'override key {here} needs an index below {len(node)}'
        )
      idx = int(part)
      if last:
        node[idx] = value
        return
      node = node[idx]
    elif isinstance(node, dict):
      if part not in node or part == 'sources':
        keys = [k for k in node if k != 'sources']
        raise InputError(
          f'unknown override key {here}; valid keys there: ' + ', '.join(keys)
        )
      if last:
        old = node[part]
        if isinstance(old, list) and not isinstance(value, list):
          if old and isinstance(old[0], dict):
            raise InputError(f'override key {here} needs an index')
          node[part] = [value] * len(old)
        else:
          node[part] = value
        return
      node = node[part]
    else:
      raise InputError(f'override key {here} goes below a value')


def split_overrides(overrides: list[str] | None) -> dict[str, list]:
  """'section.a.b=value' strings -> {section: [(path, value), ...]}."""
  out = {'workload': [], 'platform': [], 'plan': [], 'stack': []}
  for text in overrides or []:
    key, sep, value = text.partition('=')
    if not sep:
      raise InputError(f'override {text!r} is not of the form key=value')
    section, *path = key.strip().split('.')
    if section not in out or not path:
      raise InputError(
        f'override key {key!r} must start with workload., platform., plan. '
        'or stack.'
      )
    out[section].append((path, _parse_value(value.strip(), key.strip())))
  return out


def _label(name_or_path: str) -> str | None:
  """What heads a message about an input: its file, if it is one."""
  return name_or_path if is_path(name_or_path) else None


def with_overrides(tree: dict, section: str, overrides) -> dict:
  """`tree` (a section's JSON dict, changed in place) with the `section.`
  items of `overrides` (key=value strings) applied."""
  for path, value in split_overrides(overrides)[section]:
    apply_override(tree, path, value, section)
  return tree


def load_workload(name_or_path: str, overrides: list[str] | None = None):
  """A workload preset or file with its `workload.` overrides applied."""
  wj = with_overrides(workload_json(name_or_path), 'workload', overrides)
  return schema.workload_from_json(wj, _label(name_or_path))


def load_platform(
  name_or_path: str,
  overrides: list[str] | None = None,
  device_profile: str | None = None,
):
  """A platform preset or file, with the device profile at the path
  `device_profile` (if given) written into its training part (see
  `codesign.calibration.device_profile.apply_to_json`), then its `platform.`
  overrides applied."""
  pj = platform_json(name_or_path)
  if device_profile:
    from codesign.calibration import device_profile as profiles

    pj = profiles.apply_to_json(pj, profiles.load(device_profile))
  pj = with_overrides(pj, 'platform', overrides)
  return schema.platform_from_json(pj, _label(name_or_path))


def load_stack(
  name_or_path: str | None,
  overrides: list[str] | None = None,
  trainer: str = 'accelerator',
):
  """A stack preset or file with its `stack.` overrides applied; None or
  '' is the default stack of `trainer` (`stack_presets.default_for`)."""
  name_or_path = name_or_path or stack_presets.default_for(trainer)
  sj = with_overrides(stack_json(name_or_path), 'stack', overrides)
  return schema.stack_from_json(sj, _label(name_or_path))


def load_plan(name_or_path: str, w, p, s, overrides: list[str] | None = None):
  """A plan file, or a named plan made by `codesign.model.planner.make`
  for the workload `w`, platform `p` and stack `s` (`auto`: the plan the
  stack's software makes; `hbm`, `ddr`: that placement with the stack's
  sharding), with its `plan.` overrides applied."""
  if is_path(name_or_path):
    plj = _from_file(name_or_path, 'plan')
  else:
    # auto: the stack planner's own placement and sharding.
    placement = None if name_or_path == 'auto' else name_or_path
    plj = schema.plan_to_json(planner.make(w, p, s, placement=placement))
  plj = with_overrides(plj, 'plan', overrides)
  return schema.plan_from_json(plj, w, _label(name_or_path))


def rank_batch(w, p, s) -> dict:
  """The batch each rank trains (`global_batch` over the platform's
  ranks: accelerators, or sockets of a CPU trainer) against the least
  the stack's numbers were fitted at (`stack_presets.FITTED_RANK_BATCH`,
  by the stack's name): `samples_per_rank`, `stack_minimum` (None where
  the stack has none), `minimum_source` and `below_stack_minimum`."""
  ranks = float(p.nodes) * float(terms.ranks_per_node(p))
  per_rank = w.global_batch / ranks
  least, source = stack_presets.FITTED_RANK_BATCH.get(
    stack_presets.family(s.name), (None, None)
  )
  return {
    'samples_per_rank': per_rank,
    'stack_minimum': least,
    'minimum_source': source,
    'below_stack_minimum': least is not None and per_rank < least,
  }


def rank_batch_warning(info: dict, stack: str) -> str | None:
  """The warning line of a `rank_batch` below its stack's minimum, or
  None."""
  if not info['below_stack_minimum']:
    return None
  return (
    f'warning: {info["samples_per_rank"]:,.4g} samples per rank is below '
    f'the {info["stack_minimum"]:,} that {stack} is fitted at '
    f'({info["minimum_source"]}); its host and kernel costs are '
    'extrapolated there'
  )


def check_rank_batch(w, p) -> None:
  """Raises `InputError` when a rank would train less than one sample a
  step (`global_batch` below the platform's ranks)."""
  ranks = float(p.nodes) * float(terms.ranks_per_node(p))
  if w.global_batch < ranks:
    raise InputError(
      f'workload.global_batch must be at least one sample per rank, got '
      f'{w.global_batch:,} for {ranks:,.0f} ranks ({printable(p.name)}); '
      'raise the batch or use fewer nodes'
    )


def resolve(
  workload: str,
  platform: str,
  plan: str = 'auto',
  overrides: list[str] | None = None,
  device_profile: str | None = None,
  stack: str | None = None,
):
  """Loads and overrides the four inputs. Returns (workload, platform,
  plan, stack) objects; raises `InputError` on any bad input (every
  problem of one input at once).

  `device_profile`, the path of a device profile JSON or None, goes to
  `load_platform`; a named plan is made for the resolved stack. No stack
  (None or '') is the platform trainer's default; a stack that cannot
  train the platform is refused (`stack_presets.check_runs_on`), and so
  is a batch of less than one sample per rank (`check_rank_batch`).
  """
  split_overrides(overrides)  # a malformed override fails before any load
  w = load_workload(workload, overrides)
  p = load_platform(platform, overrides, device_profile)
  check_rank_batch(w, p)
  s = load_stack(stack, overrides, p.trainer)
  stack_presets.check_runs_on(s, p)
  return w, p, load_plan(plan, w, p, s, overrides), s
