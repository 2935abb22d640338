"""What every experiment script shares: input flags and error handling."""

import csv
import io
import logging
import os
import pathlib
import sys

from absl import flags

from codesign.core.errors import InputError, exit_with, printable
from experiments import streams
from experiments.flag_parsing import as_input_error, parse_flags
from experiments.streams import SafeStream  # noqa: F401  (the scripts' name)

# The preset names the help texts list, spelled out so that defining the
# flags loads no JAX (the registries: codesign.spec.workload_presets.
# WORKLOADS, platform_presets.PLATFORMS, stack_presets.PRESETS; a test
# keeps them equal).
WORKLOAD_PRESETS = (
  'criteo_1tb',
  'criteo_kaggle',
  'criteo_terabyte',
  'dlrm_benchmark',
  'mlperf_dlrm_dcnv2',
  'mlperf_dlrm_v1',
  'neo_12t',
  'nv_dlrm_large',
  'nv_dlrm_small',
  'rm1',
  'rm2',
  'rm3',
  'zion_2019',
  'zion_scale',
)
PLATFORM_PRESETS = (
  'big_basin',
  'cpu_2s',
  'cpu_4s',
  'dgx1_v100',
  'dgx2_v100',
  'dgx_a100_40gb',
  'dgx_a100_80gb',
  'dgx_b200',
  'dgx_h100',
  'dgx_h200',
  'gb200_nvl72',
  'gh200',
  'h100_pcie_8',
  'mi300x_8',
  'p4d',
  'zion',
  'zionex',
)
STACK_PRESETS = ('torchrec', 'nvidia_pytorch', 'hugectr', 'ipex_cpu', 'jax_xla')

flags.DEFINE_string(
  'from_config',
  None,
  "Path to a past run's config.json: re-run it exactly. Its flags replace "
  'every flag except --workdir; resolved workload, platform and plan '
  'sections in it are used instead of the presets of the same name.',
)
flags.DEFINE_string(
  'stack',
  '',
  'Software stack that trains the model: a preset ('
  + ', '.join(STACK_PRESETS)
  + '; see '
  'codesign/spec/stack_presets.py), as NAME (its newest release) or '
  'NAME@YEAR (its software as it stood that year, e.g. hugectr@2021, '
  'nvidia_pytorch@2020, ipex_cpu@2020: kernels, fusions, update path, '
  'graphs and planner of that release; NAME@YYYY-MM for the earlier of '
  'two releases of one year, nvidia_pytorch@2020-04), or a stack JSON '
  "file (a run's config.json also works); empty: the platform trainer's "
  'default (torchrec on accelerators, ipex_cpu on CPU trainers). The '
  'same GPUs '
  'train several times faster or slower depending on it. propose also '
  'takes any (torchrec, nvidia_pytorch and hugectr) or a comma-separated '
  'list: one search per stack, the best design of each side by side.',
)
flags.DEFINE_bool(
  'quiet',
  False,
  'Print the results only (stdout): no progress lines or bars on stderr.',
)
# Flags that say where and how to re-run, never what to compute.
_NOT_REPLAYED = (
  'from_config',
  'workdir',
  'overwrite',
  'compile_cache',
  'quiet',
)
# codesign.core.compile_cache.ENV_VAR (spelled out: flags load first)
CACHE_ENV_VAR = 'CODESIGN_COMPILE_CACHE'


def _overrides() -> list[str]:
  return flags.FLAGS.override if 'override' in flags.FLAGS else []


def load_stack():
  """The stack of --stack with the `stack.` overrides applied."""
  from codesign.boundary import inputs

  return inputs.load_stack(flags.FLAGS.stack, _overrides())


def resolve_inputs():
  """(workload, platform, plan, stack) of the input flags (--workload,
  --platform, --plan, --override, --device_profile, --stack), loaded by
  `codesign.boundary.inputs.resolve`."""
  from codesign.boundary import inputs

  fv = flags.FLAGS
  return inputs.resolve(
    fv.workload,
    fv.platform,
    fv.plan,
    fv.override,
    device_profile=fv.device_profile,
    stack=fv.stack,
  )


def load_workload():
  """The workload of --workload with the `workload.` overrides applied."""
  from codesign.boundary import inputs

  return inputs.load_workload(flags.FLAGS.workload, _overrides())


def _names(mapping) -> str:
  return ', '.join(sorted(mapping))


def define_run_flags(
  experiment: str,
  x64: bool | None = True,
  x64_help: str = 'Evaluate in float64.',
  seed_help: str = 'Recorded in env.json; this study uses no randomness.',
) -> None:
  """--workdir, --seed and --x64, with the default run directory of
  `experiment`. A script calls `flags.adopt_module_key_flags(common)`
  after its definitions so that these show in its --help."""
  flags.DEFINE_string(
    'workdir',
    None,
    f'Run directory; default results/{experiment}/<UTC timestamp>/.',
  )
  flags.DEFINE_bool(
    'overwrite',
    False,
    'Replace the files of a past run in --workdir (without it, a workdir '
    'that holds files is refused before any work).',
  )
  flags.DEFINE_integer('seed', 0, seed_help)
  flags.DEFINE_string(
    'compile_cache',
    None,
    "JAX's persistent compilation cache: a directory, or off; default the "
    f'environment variable {CACHE_ENV_VAR}, else '
    '$XDG_CACHE_HOME/codesign/jax. Saves compile time on a repeated run; '
    'the results are the same.',
  )
  if x64 is not None:  # None: the script computes in one precision
    flags.DEFINE_bool('x64', x64, x64_help)


def define_input_flags(
  workload: str | None = None,
  platform: str | None = None,
  plan: bool = False,
  override: str = '',
  device_profile: bool = False,
  workload_help: str = '',
  platform_help: str = '',
) -> None:
  """The input flags a script takes: --workload and --platform (with these
  defaults; None: the script has no such flag), --plan, --override (the
  sections it may override, e.g. 'workload,platform,plan,stack') and
  --device_profile. Help texts list the preset names."""
  if workload is not None:
    flags.DEFINE_string(
      'workload',
      workload,
      f'Workload: a preset ({_names(WORKLOAD_PRESETS)}) or a '
      "JSON file in the dumped schema (a run's config.json also works). "
      + workload_help,
    )
  if platform is not None:
    flags.DEFINE_string(
      'platform',
      platform,
      f'Platform: a preset ({_names(PLATFORM_PRESETS)}) or a '
      "JSON file in the dumped schema (a run's config.json also works). "
      + platform_help,
    )
  if plan:
    flags.DEFINE_string(
      'plan',
      'auto',
      "Execution plan: auto (the plan the stack's software makes: its "
      "planner's sharding and placement, e.g. HugeCTR's hybrid embedding, "
      "NVIDIA's whole tables in HBM, TorchRec's balanced shards with the "
      'hottest rows in the HBM the stack allows), hbm or ddr (every table '
      "there, the stack's sharding), or a plan JSON file.",
    )
  if override:
    sections = override.split(',')
    flags.DEFINE_multi_string(
      'override',
      [],
      'key=value with a dotted path into '
      + ', '.join(f'{x}.' for x in sections)
      + ' in the units of the JSON key (see evaluate --dump_schema), e.g. '
      'workload.global_batch=4096, workload.popularity_skew=1.2'
      + (', platform.nodes=4' if 'platform' in sections else '')
      + (', stack.step_floor_us=500' if 'stack' in sections else '')
      + '. Repeatable.',
    )
    flags.register_validator(
      'override',
      lambda items: all(
        x.split('=', 1)[0].split('.', 1)[0] in sections for x in items
      ),
      message='this script takes overrides of '
      + ', '.join(f'{x}.' for x in sections)
      + ' only',
    )
  if device_profile:
    flags.DEFINE_string(
      'device_profile',
      None,
      'Device profile JSON (codesign/data/profiles/ or one written by '
      'experiments.calibrate): its efficiency fields replace those of the '
      "platform's accelerator (or CPU for a CPU trainer) before overrides.",
    )


def define_system_flags(readers: str, with_failures: str) -> None:
  """--readers, --with_failures and --checkpoint: the system around the
  trainers (`codesign.spec.whole_system`), with a script's defaults."""
  flags.DEFINE_string(
    'readers',
    readers,
    'How the data reaches the trainers: local (already on them: the step '
    'alone), auto (reader nodes sized to feed them, billed apart with the '
    'storage and the front-end network) or a count of reader nodes (the '
    'step runs no faster than they feed it).',
  )
  flags.DEFINE_enum(
    'with_failures',
    with_failures,
    ['auto', 'true', 'false'],
    'Count failures: the throughput is the goodput (checkpoints at the '
    'Young/Daly interval, lost work and restarts deducted; per-GPU and '
    'per-node rates of Llama 3) and the bill holds the checkpoint storage; '
    'auto: on designs of more than 64 accelerators.',
  )
  flags.DEFINE_enum(
    'checkpoint',
    'full',
    ['full', 'incremental'],
    'How checkpoints are written: full, or incremental and quantized '
    '(Check-N-Run: 6x fewer bytes written, 2.5x fewer kept).',
  )


def define_cpu_stack_flag() -> None:
  """--cpu_stack: the stack of the CPU-trainer platforms of a script that
  evaluates several (--stack trains the others), as propose's."""
  flags.DEFINE_string(
    'cpu_stack',
    'ipex_cpu',
    'Software stack of the CPU-trainer platforms (a preset or a stack JSON '
    "file); --stack trains the accelerator ones. Each platform's stack is "
    'the one evaluate gives its trainer by default.',
  )


def define_sharding_flag(what: str, searched: bool = False) -> None:
  """--sharding: one plan sharding for every table of `what`; with
  `searched`, also `search` (the default): each table's sharding is a
  search variable (codesign.plan_space)."""
  # codesign.plan.SHARDINGS (spelled out: flags load before the library)
  names = ['table_wise', 'row_wise', 'table_row_wise', 'column_wise']
  names.append('data_parallel')
  if searched:
    flags.DEFINE_enum(
      'sharding',
      'search',
      ['search', *names],
      f'Sharding of the tables in the {what}: search (each table chooses '
      'table_wise, row_wise, table_row_wise or column_wise with the '
      'hardware, and the proposal keeps the auto plan where that does '
      'better), or one sharding for every table.',
    )
    return
  flags.DEFINE_enum(
    'sharding', 'table_wise', names, f'Sharding of every table in the {what}.'
  )


def check_flag_values() -> None:
  """The checks every script's flags share, run before any work: a float
  flag is finite, an integer flag is not negative, a list flag is not
  empty unless its help says it may be, and every element of a list flag
  is non-blank. Ranges particular to a flag are declared with it (absl's
  lower_bound/upper_bound).

  Raises:
    InputError: one sentence naming the flag and its value.
  """
  import math

  fv = flags.FLAGS
  for name in sorted(flag_values()):
    f = fv[name]
    value = f.value
    if isinstance(value, float) and not math.isfinite(value):
      raise InputError(f'--{name} must be a finite number, got {value}')
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
      raise InputError(f'--{name} must not be negative, got {value}')
    if isinstance(f, flags.MultiFlag) or not isinstance(value, list):
      continue
    if not value and 'may be empty' not in (f.help or ''):
      raise InputError(f'--{name} needs at least one value')
    if any(not str(x).strip() for x in value):
      raise InputError(f'--{name} has an empty element: {",".join(value)!r}')


def progress_printer(stream=None, heartbeat_s: float | None = None):
  """The `progress` callable of a script (`experiments.progress.Reporter`):
  phase lines, bars with their ETA, never silent, on stderr (`stream`
  for tests); nothing with --quiet. It stops drawing when the script's
  main returns."""
  from experiments import progress

  quiet = 'quiet' in flags.FLAGS and flags.FLAGS.quiet
  kw = {} if heartbeat_s is None else {'heartbeat_s': heartbeat_s}
  reporter = progress.Reporter(quiet=quiet, stream=stream, **kw)
  _REPORTERS.append(reporter)
  return reporter


# The reporters of this script's main (closed when it returns).
_REPORTERS: list = []


def enable_x64(on: bool) -> None:
  """Switches JAX's float64 on or off. JAX is first imported here, in
  `main`, after the flags are parsed: a bad flag is answered without
  waiting for it (about 2 s of a 2-core machine)."""
  import jax

  jax.config.update('jax_enable_x64', on)


# What a lack of memory tells the user to lower, unless a script says.
LOWER = 'the sizes of the inputs (tables, batch, nodes)'


def run(
  main_fn, xla_flags: bool = True, lower: str = LOWER, setup=None
) -> None:
  """Runs an experiment's `main()`: parses flags, reports bad input.
  `xla_flags`: run XLA with `xla_options.SCRIPT_XLA_FLAGS` (False: as
  the environment says, for a script that measures the local device);
  `lower`: the settings a lack of memory names; `setup`: called once the
  flags are parsed, before JAX starts its backend (XLA_FLAGS a script
  sets itself)."""
  from absl import app

  main = run_main(main_fn, xla_flags, lower, setup)
  try:
    app.run(main, flags_parser=parse_flags)
  except SystemExit as e:
    if e.code not in (None, 0):
      raise
  _exit_finished()


def _exit_finished() -> None:
  """Ends a script that finished: its runs are renamed into place and
  JAX's persistent cache written (at each compile), so only the output is
  flushed. The teardown is skipped: JAX's `clean_up` frees every compiled
  program (0.5 s after propose's 700) and the interpreter its objects
  (0.3 s more), at the end of every run, on a 2-core machine."""
  if 'jax' in sys.modules:
    sys.modules['jax'].effects_barrier()  # callbacks' output printed
  logging.shutdown()
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):
      pass
  os._exit(0)


def _safe_streams():
  """Replaces sys.stdout and sys.stderr by `SafeStream`s; returns the old
  pair, for restoring."""
  return streams.install()


def run_main(main_fn, xla_flags: bool = True, lower: str = LOWER, setup=None):
  """Wraps an absl main so bad input ends in one sentence and exit 2, and
  every name it prints is data (`SafeStream`)."""

  def wrapped(argv):
    old = _safe_streams()
    try:
      return _checked_main(main_fn, argv, xla_flags, lower, setup)
    finally:
      sys.stdout, sys.stderr = old

  return wrapped


def _start_up(xla_flags: bool, setup=None) -> None:
  """What a script checks and sets before any work: the environment's
  JAX, XLA and matplotlib variables, a replayed config, the flag values,
  the script's own `setup`, XLA's flags, the compile cache, the backend
  (started, so that the address space it takes is known), the garbage
  collector (`collector.tune`) and the device profile."""
  from codesign.core import environment, memory

  environment.check_before_jax()  # JAX reads JAX_ENABLE_X64 at import
  memory.check_address_space()  # XLA aborts while it loads under it
  fv = flags.FLAGS
  if fv.from_config:
    apply_config(fv.from_config)
  check_flag_values()
  from codesign.core import collector, compile_cache, xla_options

  if xla_flags:
    xla_options.apply_script_flags()  # before JAX first computes
  if setup is not None:
    setup()
  environment.check_xla_flags(xla_options.SCRIPT_XLA_FLAGS)
  compile_cache.enable(
    fv['compile_cache'].value if 'compile_cache' in fv else None
  )
  environment.check_platforms()
  environment.start_backend()
  memory.check_address_space_left()
  collector.tune()  # after the imports and the backend: frozen
  if 'device_profile' in fv and fv.device_profile:
    from codesign.calibration import device_profile

    # Fail early; each script passes the profile to `inputs.resolve`.
    device_profile.load(fv.device_profile)


def _checked_main(
  main_fn, argv, xla_flags: bool = True, lower: str = LOWER, setup=None
):
  """Checks the environment, the flags and the workdir before any work,
  runs `main_fn`, renames its runs into place; bad input, an OS failure
  (a full disk) and a lack of memory end in one sentence, exit 2 and no
  run."""
  # JAX logs its backend probing at INFO; keep stderr for real messages.
  logging.getLogger('jax._src.xla_bridge').setLevel(logging.WARNING)
  if len(argv) > 1:
    exit_with(InputError(f'unexpected arguments: {" ".join(argv[1:])}'))
  from codesign.core import results

  fv = flags.FLAGS
  try:
    _start_up(xla_flags, setup)
    if 'workdir' in fv:
      # Before any work: the directory must be writable and hold no
      # other run; the script writes into its staging sibling.
      experiment = pathlib.Path(sys.argv[0]).stem
      fv.workdir = str(
        results.reserve_workdir(experiment, fv.workdir, fv.overwrite)
      )
    try:
      out = main_fn()
    finally:
      for reporter in _REPORTERS:
        reporter.close()
    for path in results.finish_runs():
      print(f'wrote {path}')
    return out
  except BaseException as e:
    results.abandon_runs()
    error = as_input_error(e, lower)
    if error is None:
      raise
    exit_with(error)


def config_json(w, p=None, plan=None, s=None) -> dict:
  """config.json of a run: this script's flags and the fully resolved
  inputs it used (None: not an input of the script), so that --workload,
  --platform and --plan pointed at the file reproduce the run."""
  from codesign.spec import schema

  config = {'flags': flag_values(), 'workload': schema.workload_to_json(w)}
  if p is not None:
    config['platform'] = schema.platform_to_json(p)
  if plan is not None:
    config['plan'] = schema.plan_to_json(plan)
  if s is not None:
    config['stack'] = schema.stack_to_json(s)
  return config


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


def _flag_text(value, name: str, where: str) -> str:
  """A recorded scalar as the command line would give it."""
  if isinstance(value, bool):
    return 'true' if value else 'false'
  if isinstance(value, str):
    return value
  if isinstance(value, int | float):
    return repr(value)
  raise InputError(
    f'{where} has a bad value for --{name} ({type(value).__name__} '
    f'{printable(repr(value))[:60]}; a flag takes a string, number or '
    'true/false)'
  )


def _replay(flag, value, where: str) -> None:
  """Sets `flag` to a recorded value through the flag's own parser, as if
  it were typed on the command line (`--name=text`, repeated for a
  multi-flag; a list flag joins its items with commas); None stands for a
  flag left at a None default."""
  if value is None:
    if flag.default is not None:
      raise InputError(f'{where} has no value (null) for --{flag.name}')
    flag.unparse()
    return
  multi = isinstance(flag, flags.MultiFlag)
  listed = isinstance(flag.parser, flags.ListParser)
  if isinstance(value, list) and (multi or listed):
    texts = [_flag_text(x, flag.name, where) for x in value]
    if listed:
      buf = io.StringIO()
      csv.writer(buf, lineterminator='').writerow(texts)
      texts = [buf.getvalue()] if texts else ['']
  else:
    texts = [_flag_text(value, flag.name, where)]
  flag.unparse()
  flag.present = 0
  try:
    flag.parse(texts if multi else texts[0])
  except (flags.Error, ValueError, TypeError) as e:
    raise InputError(
      f'{where} has a bad value for --{flag.name} ({" ".join(str(e).split())})'
    ) from None


def apply_config(path: str) -> None:
  """Sets this script's flags to those recorded in a run's config.json.

  Every recorded flag except --from_config and --workdir is applied. Where
  the config holds a resolved `workload`, `platform` or `plan` section and
  the script has a flag of that name, the flag points at the config file
  itself, so the exact inputs of the past run are used even if the presets
  changed since.

  Raises:
    InputError: the file is missing or malformed, or records a flag this
      script does not have, or a value the flag rejects.
  """
  from codesign.boundary.inputs import read_json

  config = read_json(path, 'config')
  recorded = config.get('flags') if isinstance(config, dict) else None
  if not isinstance(recorded, dict):
    raise InputError(f'config file {path!r} has no "flags" object')
  fv = flags.FLAGS
  where = f'config file {printable(path)!r}'
  for name, value in sorted(recorded.items()):
    if name in _NOT_REPLAYED:
      continue
    if name not in fv:
      raise InputError(
        f'{where} records flag --{printable(name)}, which this script does '
        'not have'
      )
    _replay(fv[name], value, where)
  try:
    fv.validate_all_flags()
  except flags.Error as e:
    raise InputError(f'{where}: {" ".join(str(e).split())}') from None
  for section in ('workload', 'platform', 'plan', 'stack'):
    if section in fv and isinstance(config.get(section), dict):
      setattr(fv, section, str(path))
