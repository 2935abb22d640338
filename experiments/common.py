"""What every experiment script shares: input flags and error handling."""

import logging
import sys

from absl import flags

from codesign.errors import InputError, exit_with


def define_input_flags(workload='criteo_kaggle', platform='big_basin'):
  flags.DEFINE_string(
    'workload',
    workload,
    'Workload preset name (see codesign/workload_presets.py) or a JSON '
    "file in the dumped schema (a run's config.json also works).",
  )
  flags.DEFINE_string(
    'platform',
    platform,
    'Platform preset name (see codesign/platform_presets.py) or a JSON '
    "file in the dumped schema (a run's config.json also works).",
  )
  flags.DEFINE_string(
    'plan',
    'auto',
    'Execution plan: auto (spill to DDR only what HBM cannot hold), hbm, '
    'ddr, or a plan JSON file.',
  )
  flags.DEFINE_multi_string(
    'override',
    [],
    'key=value with a dotted path into workload., platform. or plan., in '
    'the units of the JSON key, e.g. workload.global_batch=4096, '
    'platform.nodes=4, platform.accelerator.hbm_capacity_gb=80, '
    'plan.hbm_fraction=0.5. Repeatable.',
  )
  flags.DEFINE_string(
    'workdir',
    None,
    'Run directory; default results/<experiment>/<UTC timestamp>/.',
  )


def run_main(main_fn):
  """Wraps an absl main so bad input ends in one sentence and exit 2."""

  def wrapped(argv):
    # JAX logs its backend probing at INFO; keep stderr for real messages.
    logging.getLogger('jax._src.xla_bridge').setLevel(logging.WARNING)
    if len(argv) > 1:
      exit_with(InputError(f'unexpected arguments: {" ".join(argv[1:])}'))
    try:
      return main_fn()
    except InputError as e:
      exit_with(e)

  return wrapped


def flag_values() -> dict:
  """The experiment's own flags (not absl's built-ins), for config.json."""
  fv = flags.FLAGS
  mod = sys.argv[0]
  names = set()
  for module, fl in fv.flags_by_module_dict().items():
    if (
      module == mod
      or module.endswith(('__main__', 'common'))
      or ('experiments' in module)
    ):
      names.update(f.name for f in fl)
  return {n: fv[n].value for n in sorted(names)}
