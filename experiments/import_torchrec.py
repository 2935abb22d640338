r"""Import a TorchRec model and cluster as codesign's inputs.

  python -m experiments.import_torchrec --source=model.py
  python -m experiments.import_torchrec --source=RUN/torchrec_planner.json

--source is a Python file as a TorchRec user writes it (it builds
`EmbeddingBagConfig`s named `tables`, or a DLRM `model`, a `Topology`
named `topology` and an int `batch_size`, and may build `constraints`, a
ShardingPlan `plan`, an `optimizer` class and a `dense` dict of DLRM's
arguments; running it needs TorchRec: tools/install_torchrec.sh), or a
JSON file in the format `codesign export --to=torchrec` writes. The
platform is the export's own, or the nearest preset adjusted to the
Topology; every guess is printed (`codesign.boundary.torchrec_import`).
Writes workload.json, platform.json, plan.json and stack.json, which
`evaluate --workload=... --platform=... --plan=... --stack=...` and
`propose --workload=...` take, and config.json (the four in one),
result.json (the guesses) and env.json to --workdir.
"""

import pathlib

from absl import flags

from codesign.core.errors import InputError
from experiments import common

flags.DEFINE_string(
  'source',
  None,
  'The TorchRec description: a Python file that builds the model and '
  'Topology, or a JSON file in the export format.',
)
common.define_run_flags('import_torchrec', x64=None)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS
SECTIONS = ('workload', 'platform', 'plan', 'stack')


def read_source(source: str | None) -> dict:
  """The description in --source (a Python or a JSON file)."""
  from codesign.boundary import inputs, torchrec_bridge, torchrec_import

  if not source:
    raise InputError('give --source: a Python model file or an export JSON')
  path = pathlib.Path(source)
  if not path.is_file():
    raise InputError(f'--source {source!r} is not a file')
  if path.suffix == '.py':
    torchrec_bridge.require()
    return torchrec_import.read_python(str(path))
  d = inputs.read_json(str(path), 'TorchRec description')
  if not isinstance(d, dict):
    raise InputError(f'{source} holds no TorchRec description (a JSON dict)')
  return d


def main():
  import jax

  jax.config.update('jax_enable_x64', True)
  from codesign.boundary import torchrec_import
  from codesign.core import results

  imported = torchrec_import.to_inputs(read_source(FLAGS.source))
  workdir = results.make_workdir('import_torchrec', FLAGS.workdir)
  sections = dict(zip(SECTIONS, imported[:4], strict=True))
  config = {'flags': common.flag_values(), **sections}
  final = results.final_path(workdir)
  result = {
    'source': FLAGS.source,
    'guesses': imported.guesses,
    'evaluate': ' '.join(
      ['codesign evaluate']
      + [f'--{k}={final / (k + ".json")}' for k in SECTIONS]
    ),
  }
  results.write_run(workdir, config, result)
  for key, value in sections.items():
    results.write_json(workdir / f'{key}.json', {key: value})
  w, p = sections['workload'], sections['platform']
  print(f'imported {w["name"]} ({len(w["tables"])} tables) on {p["name"]}')
  for guess in imported.guesses or ['none: the description states it all']:
    print(f'guess: {guess}')
  print(f'evaluate it: {result["evaluate"]}')


if __name__ == '__main__':
  common.run(main)
