r"""Evaluate one design: a workload on a platform under an execution plan.

  python -m experiments.evaluate --workload=zion_scale --platform=zion
  python -m experiments.evaluate --workload=criteo_kaggle \
      --platform=big_basin --override=workload.global_batch=8192

Prints a breakdown table and a per-rank table (`codesign.model.rank_stats`);
writes config.json (flags and the fully resolved workload, platform and
plan), env.json, result.json, ranks.json, breakdown.csv and ranks.csv to
--workdir.
`--workload`, `--platform` and `--plan` pointed at that config.json
reproduce the result exactly.

  python -m experiments.evaluate --dump_schema
  python -m experiments.evaluate --dump_schema=json

print every key of the JSON inputs with its type, unit, default and doc
(a table), or a JSON Schema with units and valid ranges.
"""

from absl import flags

from codesign.core.errors import InputError
from experiments import common

common.define_input_flags(
  workload='criteo_kaggle',
  platform='big_basin',
  plan=True,
  override='workload,platform,plan,stack',
  device_profile=True,
)
common.define_run_flags('evaluate')


class _SchemaFormat(flags.ArgumentParser):
  """--dump_schema's values: bare (or text, true) the table, json the JSON
  Schema, false or empty off (a config.json records false)."""

  VALUES = {'': '', 'false': '', '0': '', 'true': 'text', '1': 'text'}

  def parse(self, argument) -> str:
    text = str(argument).strip().lower()
    value = {**self.VALUES, 'text': 'text', 'json': 'json'}.get(text)
    if value is None:
      raise ValueError(f'takes text or json, got {argument!r}')
    return value

  def flag_type(self) -> str:
    return 'string'


flags.DEFINE_flag(
  flags.Flag(
    _SchemaFormat(),
    flags.ArgumentSerializer(),
    'dump_schema',
    '',
    'Print the schema of the JSON inputs (workload, platform, plan, stack) '
    'and exit, writing nothing: --dump_schema (or =text) one line per key '
    '(type, unit, default, doc, valid values); --dump_schema=json a JSON '
    'Schema (draft 2020-12) with units (x-unit) and valid ranges '
    '(minimum, maximum).',
    boolean=True,
  )
)
flags.DEFINE_bool(
  'strict',
  False,
  'Refuse a platform that breaks a buildability rule (a board that is not '
  'sold, PCIe lanes, slots, DIMM populations, fabric domains): one '
  'sentence, exit status 2, nothing written. Without it the violations '
  'are printed and recorded in result.json (buildability_violations).',
)
common.define_system_flags(readers='local', with_failures='false')
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def _dump_schema() -> None:
  """Prints the schema --dump_schema asks for."""
  if FLAGS.dump_schema == 'json':
    import json

    from codesign.spec import json_schema

    print(json.dumps(json_schema.json_schema(), indent=1))
    return
  from codesign.spec import schema

  print(schema.schema_text())


def _print(w, p, s, result, ranks, broken) -> None:
  """The tables and the lines under them: buildability, calibration, the
  per-rank batch."""
  from codesign.boundary import inputs
  from codesign.calibration import coverage
  from codesign.model import rank_stats, report, whole_system
  from codesign.spec import schema
  from codesign.studies import shared

  hw = shared.design_name(
    shared.platform_design(schema.platform_to_json(p)), short=False
  )
  print(report.table(result, f'{w.name} on {p.name} {hw} with {s.name}'))
  if 'system' in result:
    print('\n'.join(whole_system.lines(result['system'])))
  for v in broken:
    print(f'NOT BUILDABLE ({v["rule"]}): {v["sentence"]}')
  if 'hybrid_embedding' in result:
    from codesign.model.terms import hybrid

    print(hybrid.sentence(result['hybrid_embedding']))
  thr = result['throughput_samples_per_s']
  print(coverage.sentence(result['calibration'], thr))
  print(rank_stats.table(ranks))
  warning = inputs.rank_batch_warning(result['rank_batch'], s.name)
  if warning:
    print(warning)


def main():
  if FLAGS.dump_schema:
    _dump_schema()
    return
  common.enable_x64(FLAGS.x64)
  from codesign import api
  from codesign.core import results
  from codesign.model import rank_stats, report

  w, p, plan, s = common.resolve_inputs()
  broken = api.buildability_violations(p)
  if broken and FLAGS.strict:
    raise InputError(
      f'platform {p.name!r} cannot be built (--strict): '
      + '; '.join(f'{v["rule"]}: {v["sentence"]}' for v in broken)
    )
  workdir = results.make_workdir('evaluate', FLAGS.workdir)
  result = api.evaluate(
    w,
    p,
    s,
    plan,
    x64=FLAGS.x64,
    readers=FLAGS.readers,
    with_failures=FLAGS.with_failures,
    checkpoint=FLAGS.checkpoint,
  )
  ranks = rank_stats.compute(w, p, plan, s, result['breakdown_s'])
  results.write_run(workdir, common.config_json(w, p, plan, s), result)
  results.write_json(workdir / 'ranks.json', ranks)
  results.write_csv(workdir / 'breakdown.csv', *report.csv_table(result))
  results.write_csv(workdir / 'ranks.csv', *rank_stats.csv_table(ranks))
  _print(w, p, s, result, ranks, broken)


if __name__ == '__main__':
  common.run(main)
