r"""Export a run's design to the tools people train with.

  python -m experiments.export --to=torchrec RUN

RUN is a run directory of `experiments.propose` (its proposal.json) or
`experiments.evaluate` (its config.json): the workload, platform, plan and
stack in it become TorchRec sharding-planner inputs (`Topology`,
`ParameterConstraints` per table, the batch size per rank), written
atomically to RUN/torchrec_planner.json (see `codesign.boundary.export`). Bad
input ends in one sentence on stderr, exit status 2 and no file.
"""

import logging
import pathlib

from absl import app, flags

from codesign.core.errors import InputError
from experiments.flag_parsing import guarded, parse_flags

flags.DEFINE_enum(
  'to',
  'torchrec',
  ['torchrec'],
  'Tool to export to: torchrec (sharding-planner inputs).',
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


def main(argv):
  guarded(export_run, argv)


def export_run(argv):
  """Writes RUN/<tool>_planner.json; bad input, a folder that cannot be
  written (read-only, full) and a lack of memory end in one sentence
  (`guarded`)."""
  logging.getLogger('jax._src.xla_bridge').setLevel(logging.WARNING)
  if len(argv) != 2:
    raise InputError('give one run directory: export --to=torchrec RUN')
  import jax  # here: a bad flag ends before jax loads

  from codesign.core import environment

  environment.check_xla_flags()
  environment.check_platforms()
  jax.config.update('jax_enable_x64', True)
  from codesign import __version__
  from codesign.boundary import export
  from codesign.core import results

  w, p, plan, s, file = load_run(argv[1])
  env = results.env_info()
  source = {
    'source_run': str(file.parent),
    'source_file': file.name,
    'codesign_version': __version__,
    'git_sha': env['git_sha'],
    'git_dirty': env['git_dirty'],
  }
  out = export.EXPORTERS[FLAGS.to](w, p, plan, s, source)
  target = file.parent / f'{FLAGS.to}_planner.json'
  results.write_json(target, out)
  results.add_to_manifest(file.parent, [target.name])
  print(f'wrote {target}')


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
