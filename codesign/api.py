"""The public API of codesign, re-exported from `codesign`.

Inputs load from a preset name, a JSON file in the schema that
`experiments.evaluate` writes (a run's config.json or proposal.json also
works) or an already-parsed JSON dict. The JSON schema carries units in
its key names (`hbm_capacity_gb`, `hbm_bandwidth_gb_per_s`,
`step_floor_us`, ...); the loaded objects hold SI units (bytes, bytes/s,
FLOP/s, seconds, USD, W).

  import codesign

  w = codesign.load_workload('mlperf_dlrm_v1')
  p = codesign.load_platform('dgx_a100_80gb')
  r = codesign.evaluate(w, p, stack='hugectr')
  print(r['throughput_samples_per_s'], r['bottleneck'])
"""

import functools
import os
from collections.abc import Callable

import jax

from codesign.boundary import inputs
from codesign.core.errors import InputError, raise_problems
from codesign.model import planner, report, terms
from codesign.spec import hardware, schema, stack_presets, typecheck
from codesign.spec import plan as plan_lib
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl

NameOrPath = str | os.PathLike | dict


def _section(d: dict, what: str) -> dict:
  """A run's config.json or proposal.json holds each input as a section."""
  return d[what] if isinstance(d.get(what), dict) else d


def _json(name_or_path, loader, what: str) -> dict:
  if isinstance(name_or_path, dict):
    # A partial dict's base: a preset, or a file from the current folder.
    return inputs.resolve_base(_section(name_or_path, what), what)
  if isinstance(name_or_path, os.PathLike):
    name_or_path = os.fspath(name_or_path)
  if not isinstance(name_or_path, str):
    raise InputError(
      f'{what} must be a preset name, a JSON file path or a JSON dict, '
      f'got {type(name_or_path).__name__}'
    )
  return loader(name_or_path)


def load_workload(name_or_path: NameOrPath) -> wl.Workload:
  """Loads a workload (the DLRM and how it is trained).

  Args:
    name_or_path: a preset name (`criteo_kaggle`, `mlperf_dlrm_v1`, `rm1`,
      `zion_scale`, ...; see `codesign.spec.workload_presets`), a path to a JSON
      file in the dumped schema (or a run's config.json), or such a dict
      (or a dict holding it as its `workload` section). Table sizes are in
      rows and floats per row, the batch in samples per step (global, over
      all ranks). A partial one names its `base` (a preset or file) and
      the keys it changes: `{'base': 'rm1', 'global_batch': 4096}`.

  Returns:
    A validated `Workload`.

  Raises:
    InputError: unknown preset, missing or malformed file, bad values.
  """
  d = _json(name_or_path, inputs.workload_json, 'workload')
  return schema.workload_from_json(d)


def load_platform(name_or_path: NameOrPath) -> hardware.Platform:
  """Loads a platform (a training cluster of identical nodes).

  Args:
    name_or_path: a preset name (`big_basin`, `zion`, `zionex`,
      `dgx_a100_80gb`, `dgx_h100`, ...; see `codesign.spec.platform_presets`),
      a path to a JSON file in the dumped schema (keys in boundary units:
      GB, GB/s, TFLOP/s, us, USD, W; or a run's config.json or
      proposal.json), or such a dict (or one holding it as its `platform`
      section). A partial one names its `base` (a preset or file) and
      the keys it changes, objects merged key by key:
      `{'base': 'dgx_h100', 'nodes': 4, 'nic': {'count': 4}}`.

  Returns:
    A validated `Platform` with SI leaves (bytes, bytes/s, FLOP/s, s, USD,
    W).

  Raises:
    InputError: unknown preset, missing or malformed file, bad values.
  """
  d = _json(name_or_path, inputs.platform_json, 'platform')
  return schema.platform_from_json(d)


def load_stack(name_or_path: NameOrPath) -> stack_lib.Stack:
  """Loads a software stack (the software that trains the DLRM).

  Args:
    name_or_path: a preset name (`torchrec`, `nvidia_pytorch`, `hugectr`,
      `ipex_cpu`, `jax_xla`; see `codesign.spec.stack_presets`; presets carry
      the numbers fitted on the published cases) as `NAME` (its newest
      release) or `NAME@YEAR` (its software as it stood that year:
      `hugectr@2021`; `NAME@YYYY-MM` for the earlier of two releases of
      one year; `stack_presets.VERSIONS` lists them), a path to a
      stack JSON
      file (keys in boundary units such as `step_floor_us`; or a run's
      config.json), or such a dict (or one holding it as its `stack`
      section). A partial one names its `base` and the keys it changes:
      `{'base': 'torchrec', 'step_floor_us': 300}`.

  Returns:
    A validated `Stack` with SI leaves (seconds, fractions).

  Raises:
    InputError: unknown preset, missing or malformed file, bad values.
  """
  d = _json(name_or_path, inputs.stack_json, 'stack')
  return schema.stack_from_json(d)


def _typed(obj, cls, what: str):
  """Refuses a hand-built object whose fields are not of their types
  (before its own checks, which assume them); returns it with lists of
  numbers as arrays and whole numbers as ints (`typecheck.normalized`)."""
  raise_problems(typecheck.problems(obj, cls, what), what=what)
  return typecheck.normalized(obj, cls)


def _workload(w) -> wl.Workload:
  if isinstance(w, wl.Workload):
    return wl.validate(_typed(w, wl.Workload, 'workload'))
  return load_workload(w)


def _platform(p) -> hardware.Platform:
  if isinstance(p, hardware.Platform):
    return schema.validate_platform(_typed(p, hardware.Platform, 'platform'))
  return load_platform(p)


def _stack(s, p: hardware.Platform) -> stack_lib.Stack:
  """The stack `s` (None: the default of `p`'s trainer), checked to run
  on `p`."""
  if s is None:
    s = stack_presets.default_for(p.trainer)
  if isinstance(s, stack_lib.Stack):
    s = stack_lib.validate(_typed(s, stack_lib.Stack, 'stack'))
  else:
    s = load_stack(s)
  return stack_presets.check_runs_on(s, p)


def make_plan(
  workload: wl.Workload | NameOrPath,
  platform: hardware.Platform | NameOrPath,
  stack: stack_lib.Stack | NameOrPath | None = None,
  placement: str | None = None,
  sharding: str | None = None,
  x64: bool = True,
) -> plan_lib.Plan:
  """Makes an execution plan (`codesign.model.planner.make`).

  Args:
    workload: a `Workload`, or what `load_workload` takes.
    platform: a `Platform`, or what `load_platform` takes.
    stack: a `Stack`, or what `load_stack` takes (None: the platform
      trainer's default, `torchrec` or `ipex_cpu`).
    placement: `auto` (the hottest bytes in the HBM the stack allows, the
      rest in host DDR), `hbm` (every table in HBM) or `ddr` (every table
      in DDR); None: the stack planner's.
    sharding: one of `table_wise`, `row_wise`, `table_row_wise`,
      `column_wise`, `data_parallel` for every table, `auto` (the
      fastest feasible of four candidates by the cost model), `hybrid`
      (HugeCTR's hybrid embedding) or `intel` (Intel's split); None (the
      default): the plan the stack's software makes (`Stack.planner`:
      HugeCTR's hybrid embedding, NVIDIA's whole tables in HBM, Intel's
      split, TorchRec's balanced shards).
    x64: plan in float64 (as the scripts do by default).

  Returns:
    A `Plan`: the fraction of each table's rows in HBM, the share of DDR
    lookups done on the CPU, the comm overlap (fractions in [0, 1]), the
    sharding per table, column shards and comm precision.

  Raises:
    InputError: bad inputs or an unknown placement or sharding.
  """
  with jax.enable_x64(typecheck.flag('x64', x64)):
    w, p = _workload(workload), _platform(platform)
    inputs.check_rank_batch(w, p)
    s = _stack(stack, p)
    return planner.make(w, p, s, placement=placement, sharding=sharding)


def _plan(plan, w, p, s) -> plan_lib.Plan:
  if isinstance(plan, plan_lib.Plan):
    return plan_lib.validate(_typed(plan, plan_lib.Plan, 'plan'), w)
  if isinstance(plan, str) and plan in ('auto', 'hbm', 'ddr'):
    return planner.make(w, p, s, placement=None if plan == 'auto' else plan)
  if isinstance(plan, dict):
    d = _section(plan, 'plan')
  elif isinstance(plan, str | os.PathLike):
    d = inputs.read_json(os.fspath(plan), 'plan')
    if isinstance(d, dict):
      d = _section(d, 'plan')
  else:
    raise InputError(
      'plan must be auto, hbm, ddr, a Plan, a plan JSON file or a dict, '
      f'got {type(plan).__name__}'
    )
  return schema.plan_from_json(d, w)


def evaluate(
  workload: wl.Workload | NameOrPath,
  platform: hardware.Platform | NameOrPath,
  stack: stack_lib.Stack | NameOrPath | None = None,
  plan: plan_lib.Plan | NameOrPath = 'auto',
  x64: bool = True,
  readers: str | int = 'local',
  with_failures: str | bool = False,
  checkpoint: str = 'full',
) -> dict:
  """Costs one synchronous training step of a workload on a platform.

  The same numbers as `python3 -m experiments.evaluate` (its result.json).

  Args:
    workload: a `Workload`, or what `load_workload` takes.
    platform: a `Platform`, or what `load_platform` takes.
    stack: a `Stack`, or what `load_stack` takes (None: the platform
      trainer's default, TorchRec on accelerators, `ipex_cpu` on CPUs).
    plan: a `Plan`; `auto` (the plan the stack's software makes,
      `make_plan` with no placement or sharding), `hbm` or `ddr` (that
      placement, the stack's sharding); or a plan JSON file or dict (or
      one holding it as its `plan` section: a run's config.json).
    x64: evaluate in float64 (as the scripts do by default).
    readers, with_failures, checkpoint: the system around the trainers, as
      `propose` takes them (`local`, `False`: the step alone, the default;
      propose's defaults `auto`, `auto` give a proposal's own figures).

  Returns:
    A dict with units in the key names: `step_time_s` (seconds per step),
    `throughput_samples_per_s`, `breakdown_s` (component -> seconds, each
    term alone before overlap), `bottleneck` (the largest component),
    `memory` (tier -> `required_bytes` and `available_bytes` per
    accelerator for `hbm`, per node for `ddr`), `feasible`,
    `overflowing_tiers`, `feasibility_margin` (positive when everything
    fits), `capex_usd` (whole cluster), `power_w` (whole cluster at the wall),
    `perf_per_usd` (samples/s per USD), `perf_per_watt` (samples/s per
    W), `system` (with readers or failures: the whole system's bill and
    goodput terms; the figures above are then the whole system's),
    `rank_batch` (the samples each rank trains against the least the
    stack's numbers were fitted at, `inputs.rank_batch`), with a stack
    that runs HugeCTR's hybrid embedding `hybrid_embedding`
    (`terms.hybrid.summary`: the infrequent share of the lookups, the
    frequent rows, the threshold and the popularity), and the
    `workload`, `platform` and `stack` names.

  Raises:
    InputError: bad inputs, or a global batch of less than one sample
      per rank.
  """
  with jax.enable_x64(typecheck.flag('x64', x64)):
    w, p = _workload(workload), _platform(platform)
    inputs.check_rank_batch(w, p)
    s = _stack(stack, p)
    pl = _plan(plan, w, p, s)
    _cache_compiles()
    system = _system(readers, with_failures, checkpoint)
    result = report.design_figures(p, w, pl, s, system)
    result['capex_breakdown'] = report.capex_breakdown(p)
    hybrid = terms.hybrid.summary(w, s, hardware.as_arrays(p))
  if hybrid is not None:
    result['hybrid_embedding'] = hybrid
  result['rank_batch'] = inputs.rank_batch(w, p, s)
  result['buildability_violations'] = buildability_violations(p)
  result['calibration'] = calibration_of(
    p, s, result['throughput_samples_per_s']
  )
  result['workload'] = w.name
  result['platform'] = p.name
  result['stack'] = s.name
  return result


def _cache_compiles() -> None:
  """JAX's persistent compilation cache on, where the scripts keep it
  (`codesign.core.compile_cache`: the environment variable, else the
  per-user directory; `off` leaves it off), the first time the API
  compiles, unless the caller set JAX's own: a notebook's next kernel
  reads its compiles back (a default `propose` in about a quarter of its
  cold time). The results are the same either way."""
  if not jax.config.jax_compilation_cache_dir:
    _enable_cache_once()


@functools.cache
def _enable_cache_once() -> None:
  """`compile_cache.enable`, once a process (a cache it finds broken is
  said once, in one line, and stays off)."""
  from codesign.core import compile_cache

  compile_cache.enable()


def _system(readers, with_failures, checkpoint):
  """The `WholeSystem` of evaluate's settings, or None where it changes
  nothing (the data local, failures not counted)."""
  from codesign.spec import whole_system as ws

  s = ws.from_settings(
    readers, with_failures, checkpoint, report.DEFAULT_TRAIN_SAMPLES
  )
  return s if s.active else None


def calibration_of(p: hardware.Platform, s: stack_lib.Stack, throughput):
  """The published cases behind a design's figures and its throughput
  band (`codesign.calibration.coverage`): nearest cases, extrapolation
  flags, the band's half-width and its samples/s."""
  from codesign.calibration import coverage

  part = p.accelerator.name if p.trainer == 'accelerator' else p.cpu.name
  cov = coverage.coverage(s.name, part, p.trainer, float(p.nodes))
  return {**cov, 'throughput_band': coverage.band_of(throughput, cov['band'])}


def from_torchrec(
  source: str | os.PathLike | dict | None = None,
  *,
  tables=None,
  topology=None,
  batch_size=None,
  model=None,
  dense: dict | None = None,
  constraints: dict | None = None,
  plan=None,
  optimizer=None,
) -> dict:
  """The workload, platform, plan and stack of a TorchRec model and
  cluster, as `codesign import_torchrec` makes them.

  Give either `source` (a Python file that builds the model and
  Topology, a JSON file in the format `codesign export --to=torchrec`
  writes, or that format's dict) or TorchRec's objects: `tables`
  (`EmbeddingBagConfig`s or an `EmbeddingBagCollection`) or `model` (a
  DLRM), `topology`, `batch_size` (per rank), and where known `dense`
  (DLRM's arguments), `constraints`, `plan` (a `ShardingPlan`) and
  `optimizer` (the embedding optimizer class). The platform is the
  export's own, or the nearest preset adjusted to the Topology
  (`codesign.boundary.torchrec_import`).

  Returns:
    A dict: `workload`, `platform`, `plan`, `stack` (JSON dicts that
    `evaluate` and `propose` take) and `guesses` (a sentence per guess).

  Raises:
    InputError: a description that cannot be read, in one sentence.
  """
  from codesign.boundary import torchrec_bridge, torchrec_import

  if source is None:
    d = torchrec_import.describe(
      tables=tables,
      topology=topology,
      batch_size=batch_size,
      model=model,
      dense=dense,
      constraints=constraints,
      plan=plan,
      optimizer=optimizer,
    )
  elif isinstance(source, dict):
    d = source
  elif os.fspath(source).endswith('.py'):
    torchrec_bridge.require()
    d = torchrec_import.read_python(os.fspath(source))
  else:
    d = inputs.read_json(os.fspath(source), 'TorchRec description')
  with jax.enable_x64(True):
    got = torchrec_import.to_inputs(d)
  return {**got._asdict()}


def buildability_violations(platform) -> list[dict]:
  """The buildability rules a platform breaks
  (`codesign.search.buildability.violations`: boards that are not sold,
  PCIe lanes, slots and generations, DIMM populations, fabric domains),
  each as {'rule', 'sentence'}; [] for a platform that can be built."""
  from codesign.search import buildability

  p = _platform(platform)
  return [
    {'rule': rule, 'sentence': sentence}
    for rule, sentence in buildability.violations(p)
  ]


def propose(
  workload: wl.Workload | str,
  objective: str = 'throughput_per_usd',
  budget_usd: float | None = 1e6,
  power_w: float | None = None,
  max_nodes: int = 36,
  stack: stack_lib.Stack | str = 'torchrec',
  cpu_stack: stack_lib.Stack | str = 'ipex_cpu',
  starts: int = 64,
  steps: int = 300,
  seed: int = 0,
  progress: Callable[[int, dict], None] | None = None,
  samples: float = 1e9,
  sharding: str = 'search',
  presets: tuple[str, ...] | None = None,
  x64: bool = True,
  trainers: tuple[str, ...] = ('accelerator', 'cpu'),
  price: tuple[str, ...] = (),
  *,
  exclude_parts: tuple[str, ...] = (),
  only_parts: tuple[str, ...] = (),
  available_by: int | None = None,
  systems: tuple[str, ...] = ('board', 'superchip', 'pcie'),
  tolerance: float = 0.02,
  memory_headroom: float = 0.03,
  rack_kw: float | None = 142.0,
  life_years: float = 5.0,
  usd_per_kwh: float = 0.08,
  pue: float = 1.58,
  override: tuple[str, ...] = (),
  catalog: str | os.PathLike | dict | None = None,
  readers: str = 'auto',
  with_failures: str = 'auto',
  checkpoint: str = 'full',
  convergence: bool = True,
) -> dict:
  """Proposes the platform to build for a workload, under limits.

  What `python3 -m experiments.propose` computes
  (`codesign.studies.proposal.run`), with the same arguments as its flags
  and the same proposal as its result.json, without writing files: a
  gradient search over buildable platforms (catalog parts and counts)
  and their plans, the best buildable design evaluated, beside the
  continuous optimum and the platform presets. The precision is set
  here, for this call only (`x64`), whatever the caller's JAX settings.
  About 40 s on 2 CPU cores with the default starts and steps.

  Args:
    workload: a `Workload`, a preset name or a workload JSON file.
    objective: `throughput` (samples/s), `throughput_per_usd` (samples/s
      per USD of capex), `throughput_per_watt` (samples/s per W at the
      wall), `time_to_train` (seconds to train `samples`; minimized) or
      `throughput_per_tco` (samples/s per USD of capex plus energy).
    budget_usd: capex limit of the whole cluster in USD (None or 0: none).
    power_w: power limit of the whole cluster at the wall in W (None or
      0: none).
    max_nodes: largest number of nodes.
    stack: a `Stack`, a stack preset name or a stack JSON file: the
      accelerator trainer's.
    cpu_stack: the same, for the CPU trainer.
    starts: search starts run at once.
    steps: Adam steps per phase (continuous search, then plan polish).
    seed: random seed of the starts.
    progress: called as progress(step, metrics) between chunks of steps
      (see `codesign.studies.proposal.run`).
    samples: samples to train, for `time_to_train`.
    sharding: `search` (each table's sharding searched with the hardware;
      the proposal keeps the auto plan where it does better), or one of
      `plan.SHARDINGS` for every table.
    presets: platform preset names evaluated beside the proposal (None:
      `codesign.studies.proposal.PRESETS`).
    x64: search in float64 (as the script does by default).
    trainers: kinds of platform searched, each in its own design space
      (`accelerator`, `cpu`); the best is proposed.
    price: 'PART=USD' strings, a catalog part's price in place of the
      catalog's (as `--price`).
    exclude_parts: catalog parts the search may not use (names or their
      beginnings, as `--exclude_parts`).
    only_parts: catalog parts the search may use, per part axis it names
      parts of (as `--only_parts`).
    available_by: only parts the catalog dates no later than this year
      (None: every part).
    systems: the accelerator trainer's system classes, each a design space
      of its own (`board`, `superchip`, `pcie`; as `--systems`).
    tolerance: throughput objectives: the proposal is the cheapest design
      within this share of the best found, in [0, 1).
    memory_headroom: the share of each accelerator's usable HBM every
      candidate keeps free beyond the stack's reserve, in [0, 0.3].
    rack_kw: the most one rack may draw in kW (None or 0: no rack rule).
    life_years, usd_per_kwh, pue: the TCO printed beside the proposal.
    override: 'section.key=value' strings for the `workload.` and
      `stack.` sections, as `--override` (the stack's apply to `stack`).
    catalog: a parts JSON file or dict (`codesign.spec.user_parts`, as
      `--catalog`): its accelerators and CPUs join the catalog for this
      call only, searched beside the shipped parts and named by
      `only_parts`, `exclude_parts` and `price`.
    readers, with_failures, checkpoint, convergence: the system around
      the trainers, as `--readers` (`auto`, `local` or a count of reader
      nodes), `--with_failures` (`auto`, `true`, `false`), `--checkpoint`
      (`full`, `incremental`) and `--convergence`.

  Returns:
    A dict: `proposal` (`platform` and `plan` JSON, `objective_value`,
    `within_limits`, `constraint_violations`, `with_auto_plan` figures,
    and the `evaluate` figures of the proposal), `proposal_json` (the
    `workload`, `platform`, `plan` and `stack` JSON that `load_*` and
    `evaluate` read back), `continuous_optimum`, `presets` (one row of
    figures per preset), `objective`, `objective_unit`, `limits`,
    `search` (settings and evaluations used), `timing` (wall seconds) and
    `history` (per Adam step: best feasible objective and violations);
    with `catalog`, `user_parts` (the parts as the catalog holds them).
    Every key but `proposal_json`, `timing` and `history` is the
    command line's result.json.

  Raises:
    InputError: bad inputs, or no buildable platform meets the limits (the
      sentence names the constraint and by how much).
  """
  kw = dict(locals())  # the arguments, as the study's settings
  del kw['progress'], kw['x64']
  if progress is not None and not callable(progress):
    raise InputError(f'progress must be callable or None, got {progress!r}')
  # Imported here: the search (and Optax) load only when a proposal is
  # asked for, so `import codesign` stays quick.
  from codesign.studies import proposal

  with jax.enable_x64(typecheck.flag('x64', x64)):
    settings = _proposal_settings(proposal, **kw)
    _cache_compiles()
    result, history = proposal.run(settings, on_step=progress)
  result['history'] = history
  return result


def _input(value, cls, what: str):
  """A propose input: a validated hand-built object, or a name or path
  (loaded by the study)."""
  if isinstance(value, wl.Workload):
    return _workload(value)
  if isinstance(value, stack_lib.Stack):  # the study checks its trainer
    return stack_lib.validate(_typed(value, stack_lib.Stack, what))
  if isinstance(value, os.PathLike):
    return os.fspath(value)
  if not isinstance(value, str):
    raise InputError(
      f'{what} must be a {cls.__name__}, a preset name or a JSON file path, '
      f'got {type(value).__name__}'
    )
  return value


def _overridden(value, section: str, overrides: tuple[str, ...], load):
  """A propose input with its `section.` overrides applied (loaded by
  `load` from its name or path; a hand-built object takes none)."""
  if not inputs.split_overrides(list(overrides))[section]:
    return value
  if not isinstance(value, str):
    raise InputError(
      f'override of {section}. needs {section} as a preset name or a JSON '
      'file path, not a built object'
    )
  return load(value, list(overrides))


def _proposal_settings(proposal, **kw):
  """`proposal.Settings` of `propose`'s arguments, each checked as the
  command line checks its flag (one-sentence `InputError`)."""
  from codesign.search import gradient, plan_space

  t = typecheck
  override = t.names('override', kw['override'])
  for item in override:
    if item.split('=', 1)[0].split('.', 1)[0] not in ('workload', 'stack'):
      raise InputError(
        f'override takes workload. and stack. keys only, got {item!r}'
      )
  available_by = kw['available_by']
  if available_by is not None:
    available_by = t.count('available_by', available_by, lo=1900)
  workload = _input(kw['workload'], wl.Workload, 'workload')
  stack = _input(kw['stack'], stack_lib.Stack, 'stack')
  return proposal.Settings(
    workload=_overridden(workload, 'workload', override, inputs.load_workload),
    objective=t.choice('objective', kw['objective'], gradient.OBJECTIVES),
    budget_usd=t.real('budget_usd', kw['budget_usd'], none=True),
    power_w=t.real('power_w', kw['power_w'], none=True),
    max_nodes=t.count('max_nodes', kw['max_nodes']),
    samples=t.real('samples', kw['samples'], positive=True),
    starts=t.count('starts', kw['starts']),
    steps=t.count('steps', kw['steps']),
    seed=t.count('seed', kw['seed'], lo=0),
    sharding=t.choice(
      'sharding', kw['sharding'], (plan_space.SEARCH, *plan_lib.SHARDINGS)
    ),
    presets=t.names(
      'presets', proposal.PRESETS if kw['presets'] is None else kw['presets']
    ),
    stack=_overridden(stack, 'stack', override, inputs.load_stack),
    cpu_stack=_input(kw['cpu_stack'], stack_lib.Stack, 'cpu_stack'),
    trainers=t.names('trainers', kw['trainers']),
    systems=t.names('systems', kw['systems']),
    price=t.names('price', kw['price']),
    exclude_parts=t.names('exclude_parts', kw['exclude_parts']),
    only_parts=t.names('only_parts', kw['only_parts']),
    available_by=available_by,
    tolerance=t.real('tolerance', kw['tolerance']),
    memory_headroom=t.real('memory_headroom', kw['memory_headroom']),
    rack_kw=t.real('rack_kw', kw['rack_kw'], none=True),
    life_years=t.real('life_years', kw['life_years']),
    usd_per_kwh=t.real('usd_per_kwh', kw['usd_per_kwh']),
    pue=t.real('pue', kw['pue']),
    catalog=_catalog(kw['catalog']),
    readers=str(kw['readers']),
    with_failures=str(kw['with_failures']).lower(),
    checkpoint=t.choice(
      'checkpoint', kw['checkpoint'], ('full', 'incremental')
    ),
    convergence=t.flag('convergence', kw['convergence']),
  )


def _catalog(value):
  """propose's `catalog`: a path (as text) or a dict, or None."""
  if value is None or isinstance(value, dict | str):
    return value
  if isinstance(value, os.PathLike):
    return os.fspath(value)
  raise InputError(
    'catalog must be a parts JSON file path, a dict or None, got '
    f'{type(value).__name__}'
  )
