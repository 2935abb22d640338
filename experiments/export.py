r"""Export a run's design to the tools people train with.

  python -m experiments.export --to=torchrec RUN
  python -m experiments.export --to=torchrec --compare RUN

RUN is a run directory of `experiments.propose` (its proposal.json) or
`experiments.evaluate` (its config.json): the workload, platform, plan and
stack in it become TorchRec's inputs (`Topology`, the tables and their
`ParameterConstraints`, the embedding optimizer, the dense part, the batch
per rank and a `ShardingPlan`), written atomically to
RUN/torchrec_planner.json (see `codesign.boundary.export`). What TorchRec
cannot express as planned is printed as warnings. A design that does not
fit its memory is refused unless `--force`. `--compare` plans the export
in TorchRec's planner (TorchRec's CPU build: tools/install_torchrec.sh)
and prints both tools' per-rank estimates side by side. Bad input ends in
one sentence on stderr, exit status 2 and no file.
"""

import logging
import pathlib
import sys

from absl import app, flags

from codesign.core.errors import InputError
from experiments.flag_parsing import guarded, parse_flags

flags.DEFINE_enum(
  'to',
  'torchrec',
  ['torchrec'],
  'Tool to export to: torchrec (planner inputs and a sharding plan).',
)
flags.DEFINE_bool(
  'force',
  False,
  'Export a design that does not fit its memory (HBM or DDR overflows); '
  'without it such a design is refused.',
)
flags.DEFINE_bool(
  'compare',
  False,
  "Plan the export in TorchRec's planner and print both tools' per-rank "
  'HBM, DDR and step estimates side by side (needs TorchRec: '
  'tools/install_torchrec.sh).',
)
flags.DEFINE_bool(
  'quiet',
  False,
  'Print the results only (this script prints no progress: accepted as '
  'every script does).',
)
FLAGS = flags.FLAGS
SECTIONS = ('workload', 'platform', 'plan', 'stack')


def load_run(run: str):
  """(workload, platform, plan, stack, file) of a run directory."""
  from codesign import api
  from codesign.boundary import inputs
  from codesign.spec import schema

  path = pathlib.Path(run)
  if not path.is_dir():
    raise InputError(f'run directory {run!r} does not exist')
  file = path / 'proposal.json'
  file = file if file.is_file() else path / 'config.json'
  if not file.is_file():
    raise InputError(
      f'run directory {run!r} has no config.json (nor proposal.json); '
      'export reads runs of experiments.evaluate or experiments.propose'
    )
  d = inputs.read_json(str(file), 'run')
  missing = [k for k in SECTIONS if not isinstance(d, dict) or k not in d]
  if missing:
    raise InputError(
      f'{file} lacks the {", ".join(missing)} section(s); export reads '
      'runs of experiments.evaluate or experiments.propose'
    )
  w = api.load_workload(d)
  plan = schema.plan_from_json(d['plan'], w)
  return w, api.load_platform(d), plan, api.load_stack(d), file


def refuse_overflow(figures: dict, force: bool) -> None:
  """`InputError` for a design whose memory overflows, unless `force`."""
  over = figures['overflowing_tiers']
  if not over or force:
    return
  m = figures['memory']
  parts = [
    f'{t.upper()} {m[t]["required_bytes"] / 1e9:.1f} GB needed of '
    f'{m[t]["available_bytes"] / 1e9:.1f} GB per {m[t]["per"]}'
    for t in over
  ]
  raise InputError(
    f'the design does not fit ({"; ".join(parts)}); TorchRec would find no '
    'plan for it: export it anyway with --force'
  )


def export(run: str) -> tuple[pathlib.Path, dict]:
  """(target file, export dict) of run directory `run`."""
  from codesign import __version__, api
  from codesign.boundary import export as ex
  from codesign.core import results

  w, p, plan, s, file = load_run(run)
  figures = api.evaluate(w, p, s, plan, x64=True)
  refuse_overflow(figures, FLAGS.force)
  if FLAGS.compare:
    from codesign.boundary import torchrec_bridge

    torchrec_bridge.require()
  env = results.env_info()
  source = {
    'source_run': str(file.parent),
    'source_file': file.name,
    'codesign_version': __version__,
    'git_sha': env['git_sha'],
    'git_dirty': env['git_dirty'],
    'forced': bool(figures['overflowing_tiers']),
  }
  out = ex.EXPORTERS[FLAGS.to](w, p, plan, s, source, figures)
  return file.parent / f'{FLAGS.to}_planner.json', out


def main(argv):
  guarded(export_run, argv)


def export_run(argv):
  """Writes RUN/<tool>_planner.json (and, with --compare, prints both
  tools' estimates); bad input, a design that does not fit (without
  --force), a folder that cannot be written (read-only, full) and a lack
  of memory end in one sentence (`guarded`)."""
  logging.getLogger('jax._src.xla_bridge').setLevel(logging.WARNING)
  if len(argv) != 2:
    raise InputError('give one run directory: export --to=torchrec RUN')
  import jax  # here: a bad flag ends before jax loads

  from codesign.core import environment

  environment.check_xla_flags()
  environment.check_platforms()
  jax.config.update('jax_enable_x64', True)
  from codesign.core import results

  target, out = export(argv[1])
  results.write_json(target, out)
  results.add_to_manifest(target.parent, [target.name])
  # After the write: a folder that cannot take it ends in one sentence.
  for warning in out['header']['warnings']:
    print(f'warning: {warning}', file=sys.stderr)
  print(f'wrote {target}')
  if FLAGS.compare:
    from codesign.boundary import torchrec_bridge

    both = torchrec_bridge.plan_both(out)  # a failure: one sentence
    print(torchrec_bridge.compare_table(out, both))


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
