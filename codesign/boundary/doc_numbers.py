"""The figures README.md and WORKSPACE.md quote from runs, and the
commands that give them.

Each `Figure` names its file, the text just before it (an anchor, matched
with any run of whitespace, and a `# ` comment prefix after a line break,
between its words, so that re-wrapping a paragraph keeps it), the run
that produces it (`Run`: an `experiments` script and its flags), the key
of that run's result (dotted: `capex_breakdown.network.usd`; an integer
part indexes a list), the format
it is printed in and, for a percentage, the published value it is
compared with. `rows` compares the figures in the documents with the
results of the runs, and `rewritten` puts the new ones in place. Pure
functions: the caller reads and writes the files and runs the commands
(`experiments/doc_numbers.py`).
"""

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from codesign.core.errors import InputError


@dataclasses.dataclass(frozen=True)
class Run:
  """A run of `python3 -m experiments.<script>` with its flags, in order
  (a flag may repeat, as `--override` does)."""

  script: str
  flags: tuple[tuple[str, str], ...] = ()

  def flag(self, name: str, default: str = '') -> str:
    """The last value of flag `name`, or `default`."""
    values = self.values(name)
    return values[-1] if values else default

  def values(self, name: str) -> list[str]:
    """Every value of flag `name`, in order."""
    return [v for k, v in self.flags if k == name]


@dataclasses.dataclass(frozen=True)
class Figure:
  """One figure a document quotes from a run."""

  file: str  # relative to the checkout: README.md, WORKSPACE.md
  before: str  # the text just before it, unique in the file; <n>: a number
  run: Run
  key: str  # dotted path into the run's result
  fmt: str  # a name in FORMATS
  relative_to: float | None = None  # a percentage against this value
  slow: bool = False  # a run of minutes (--include_slow)


def _millions(digits: int) -> Callable[[float], str]:
  return lambda v: f'{v / 1e6:.{digits}f}M'


_NUMBER = r'[0-9]+(?:\.[0-9]+)?'
# format name -> (value to text, the regex the text matches)
FORMATS: dict[str, tuple[Callable[[float], str], str]] = {
  'M1': (_millions(1), _NUMBER + 'M'),
  'M2': (_millions(2), _NUMBER + 'M'),
  'pct1': (lambda v: f'{v:+.1f}%', r'[+-]' + _NUMBER + '%'),
  'millions1': (lambda v: f'{v / 1e6:.1f}', _NUMBER),
  'kusd': (lambda v: f'${v / 1e3:.0f}k', r'\$' + _NUMBER + 'k'),
  'f1': (lambda v: f'{v:.1f}', _NUMBER),
  'giga0': (lambda v: f'{v / 1e9:.0f}', _NUMBER),
  'int': (lambda v: f'{v:.0f}', '[0-9]+'),
  'k0': (lambda v: f'{v / 1e3:.0f}k', _NUMBER + 'k'),
  'share_pct0': (lambda v: f'{v * 100:.0f}%', _NUMBER + '%'),
  'ms2': (lambda v: f'{v * 1e3:.2f}', _NUMBER),
  'pct1abs': (lambda v: f'{v * 100:.1f}%', _NUMBER + '%'),
  'f2': (lambda v: f'{v:.2f}', _NUMBER),
}


def evaluate(
  workload: str, platform: str, stack: str = '', *overrides: str
) -> Run:
  """A run of `experiments.evaluate` (its defaults where not given)."""
  flags = [('workload', workload), ('platform', platform)]
  flags += [('stack', stack)] if stack else []
  flags += [('override', o) for o in overrides]
  return Run('evaluate', tuple(flags))


# The HugeCTR release MLPerf v1.0 ran (21.05), as its published figure.
_V1_HUGECTR = evaluate('mlperf_dlrm_v1', 'dgx_a100_80gb', 'hugectr@2021-05')
_DCNV2 = 'mlperf_dlrm_dcnv2'
_THROUGHPUT = 'throughput_samples_per_s'
_PROPOSE = Run('propose')
_SCALE_OUT = Run('scale_out')
# The public cases do not depend on the local device's run: --smoke times
# the fewest local steps.
_CALIBRATE = Run('calibrate', (('smoke', 'true'),))
_ROW_WISE = Run('scale_out', (('sharding', 'row_wise'),))
_NETWORK = evaluate(
  'criteo_kaggle',
  'dgx_h100',
  '',
  'platform.nodes=1024',
  'workload.global_batch=65536',
)
_NVL72 = evaluate(_DCNV2, 'gb200_nvl72', 'hugectr')

FIGURES: tuple[Figure, ...] = (
  # README, Examples
  Figure('README.md', 'v1.0 ran it gives', _V1_HUGECTR, _THROUGHPUT, 'M1'),
  Figure(
    'README.md',
    'against the 35.78M published,',
    _V1_HUGECTR,
    _THROUGHPUT,
    'pct1',
    relative_to=35.78e6,
  ),
  Figure(
    'README.md',
    'NVLink bridges on pairs):',
    evaluate(_DCNV2, 'h100_pcie_8'),
    _THROUGHPUT,
    'M2',
  ),
  Figure(
    'README.md',
    "on mlperf_dlrm_dcnv2 against dgx_h100's",
    evaluate(_DCNV2, 'dgx_h100'),
    _THROUGHPUT,
    'M2',
  ),
  # README, Software stacks: the public cases leave-one-case-out
  Figure(
    'README.md',
    'predicts those measurements within a median error of',
    _CALIBRATE,
    'median_abs_rel_error_public',
    'pct1abs',
    slow=True,
  ),
  Figure(
    'README.md',
    'and a worst of',
    _CALIBRATE,
    'max_abs_rel_error_public',
    'pct1abs',
    slow=True,
  ),
  # WORKSPACE, What the model says: today's presets, MLPerf settings
  Figure(
    'WORKSPACE.md',
    'torchrec, auto plan):',
    evaluate(_DCNV2, 'dgx_b200'),
    _THROUGHPUT,
    'M2',
  ),
  Figure(
    'WORKSPACE.md',
    'samples/s on dgx_b200,',
    evaluate(_DCNV2, 'mi300x_8'),
    _THROUGHPUT,
    'M2',
  ),
  Figure(
    'WORKSPACE.md',
    'on mi300x_8,',
    evaluate(_DCNV2, 'gh200'),
    _THROUGHPUT,
    'M2',
  ),
  Figure(
    'WORKSPACE.md',
    'on gh200 and',
    evaluate(_DCNV2, 'h100_pcie_8'),
    _THROUGHPUT,
    'M2',
  ),
  Figure(
    'WORKSPACE.md',
    'on h100_pcie_8 (dgx_h100',
    evaluate(_DCNV2, 'dgx_h100'),
    _THROUGHPUT,
    'M2',
  ),
  Figure(
    'WORKSPACE.md',
    '--stack=hugectr@2021-05`:',
    _V1_HUGECTR,
    _THROUGHPUT,
    'M1',
  ),
  Figure(
    'WORKSPACE.md',
    'samples/s against 35.78M published (',
    _V1_HUGECTR,
    _THROUGHPUT,
    'pct1',
    relative_to=35.78e6,
  ),
  Figure(
    'WORKSPACE.md',
    '`mlperf_dlrm_dcnv2` on dgx_h100 with HugeCTR:',
    evaluate(_DCNV2, 'dgx_h100', 'hugectr'),
    _THROUGHPUT,
    'M1',
  ),
  Figure(
    'WORKSPACE.md',
    '14.52M published at batch 55,296 (',
    evaluate(_DCNV2, 'dgx_h100', 'hugectr'),
    _THROUGHPUT,
    'pct1',
    relative_to=14.52e6,
  ),
  # WORKSPACE, What the model says: the network of 1,024 DGX H100
  Figure(
    'WORKSPACE.md',
    '24,576 links): network',
    _NETWORK,
    'capex_breakdown.network.usd',
    'millions1',
  ),
  Figure(
    'WORKSPACE.md',
    'links): network <n> of',
    _NETWORK,
    'capex_breakdown.total_usd',
    'millions1',
  ),
  # WORKSPACE, What the model says: GB200 NVL72 against DGX B200 nodes
  Figure(
    'WORKSPACE.md',
    '| gb200_nvl72 (1 rack) |',
    _NVL72,
    _THROUGHPUT,
    'M1',
  ),
  Figure(
    'WORKSPACE.md',
    '| 9 x dgx_b200 |',
    evaluate(_DCNV2, 'dgx_b200', 'hugectr', 'platform.nodes=9'),
    _THROUGHPUT,
    'M1',
  ),
  Figure(
    'WORKSPACE.md',
    '| gb200_nvl72, 2 racks |',
    evaluate(_DCNV2, 'gb200_nvl72', 'hugectr', 'platform.nodes=36'),
    _THROUGHPUT,
    'M1',
  ),
  # WORKSPACE, What the model says: propose's defaults (a minute or two)
  Figure(
    'WORKSPACE.md',
    'every table in HBM,',
    _PROPOSE,
    'proposal.' + _THROUGHPUT,
    'M2',
    slow=True,
  ),
  Figure(
    'WORKSPACE.md',
    'every table in HBM, <n>M samples/s for',
    _PROPOSE,
    'proposal.capex_usd',
    'kusd',
    slow=True,
  ),
  Figure(
    'WORKSPACE.md',
    'every table in HBM, <n>M samples/s for $<n>k (',
    _PROPOSE,
    'proposal.perf_per_usd',
    'f1',
    slow=True,
  ),
  Figure(
    'WORKSPACE.md',
    'per $); it buys',
    _PROPOSE,
    'ddr.bought_bytes_per_node',
    'giga0',
    slow=True,
  ),
  # WORKSPACE, What the model says: compare_platforms's defaults (minutes)
  *(
    Figure(
      'WORKSPACE.md',
      before,
      Run('compare_platforms'),
      f'platforms.{platform}.throughput_samples_per_s.{size}',
      'M2',
      slow=True,
    )
    for before, platform, size in (
      ('leads throughput at every size:', 'zionex', 0),  # 10 GB
      ('falling slowly to', 'zionex', 12),  # 2.5 TB
      ('spills to DDR (10 TB:', 'zionex', -1),  # 10 TB
      ('dgx_h100 leads throughput (', 'dgx_h100', 0),
    )
  ),
  # WORKSPACE, What the model says: scale_out's defaults and row-wise
  # (seconds each)
  Figure(
    'WORKSPACE.md',
    'holding them\n  is worth x',
    _SCALE_OUT,
    'efficiency_reference.capacity_effect',
    'f2',
  ),
  *(
    Figure('WORKSPACE.md', before, run, 'per_node_count.' + key, fmt)
    for before, run, key, fmt in (
      (
        'one node spills its tables to DDR (',
        _SCALE_OUT,
        '0.throughput_samples_per_s',
        'k0',
      ),
      (
        'all-to-all grows from',
        _SCALE_OUT,
        '1.breakdown_s.alltoall_inter',
        'ms2',
      ),
      ('ms at 2 nodes to', _SCALE_OUT, '-1.breakdown_s.alltoall_inter', 'ms2'),
      (
        '80% needs',
        _ROW_WISE,
        '1.required_nic_gbit_per_s_per_accelerator',
        'f1',
      ),
      (
        'per accelerator at 2 nodes and',
        _ROW_WISE,
        '2.required_nic_gbit_per_s_per_accelerator',
        'int',
      ),
      (
        'out of reach\n  from 16 (',
        _ROW_WISE,
        '4.efficiency_at_max_bandwidth',
        'share_pct0',
      ),
    )
  ),
)


def arguments(run: Run) -> list[str]:
  """The arguments of `run` after `python3`."""
  return ['-m', f'experiments.{run.script}'] + [
    f'--{k}={v}' for k, v in run.flags
  ]


def command(run: Run) -> str:
  """The shell command of `run`."""
  return ' '.join(['python3', *arguments(run)])


def selected(
  figures: Sequence[Figure], include_slow: bool
) -> tuple[Figure, ...]:
  """The figures to recompute: the quick ones, and with `include_slow`
  those of runs of minutes too."""
  return tuple(f for f in figures if include_slow or not f.slow)


def runs(figures: Sequence[Figure]) -> list[Run]:
  """The distinct runs of `figures`, in the order they first appear."""
  return list(dict.fromkeys(f.run for f in figures))


# Between words: whitespace, or a line break into a `# ` comment line.
_GAP = r'(?:\s*\n#\s*|\s+)'


def anchor_pattern(before: str) -> str:
  """The regex of an anchor: its words, any whitespace between them (a
  `# ` comment prefix after a line break too), then whitespace. A word
  `<n>` stands for any number in a word (another figure in the anchor:
  `<n>M`, `$<n>k`)."""
  words = [
    _NUMBER.join(re.escape(part) for part in w.split('<n>'))
    for w in before.split()
  ]
  return _GAP.join(words) + r'(?:' + _GAP + r')?'


def locate(text: str, figure: Figure) -> tuple[int, int]:
  """(start, end) of `figure` in `text`, the document of its file.

  Raises:
    InputError: the anchor is missing, found more than once, or not
      followed by a figure in the figure's format.
  """
  found = list(re.finditer(anchor_pattern(figure.before), text))
  where = f'{figure.file}: the text {figure.before!r}'
  if len(found) != 1:
    n = 'not found' if not found else f'found {len(found)} times'
    raise InputError(f'{where} is {n}; update {__name__}')
  at = found[0].end()
  m = re.compile(FORMATS[figure.fmt][1]).match(text, at)
  if not m:
    raise InputError(
      f'{where} is not followed by a figure like {figure.fmt}; update '
      f'{__name__}'
    )
  return m.start(), m.end()


def value_of(result: Mapping, key: str) -> float:
  """The number at dotted `key` of a run's result (a part that is an
  integer indexes a list: `platforms.zionex.throughput_samples_per_s.-1`)."""
  value = result
  for part in key.split('.'):
    if isinstance(value, list) and re.fullmatch('-?[0-9]+', part):
      if not -len(value) <= int(part) < len(value):
        raise InputError(f'the run has no result key {key!r}')
      value = value[int(part)]
    elif isinstance(value, Mapping) and part in value:
      value = value[part]
    else:
      raise InputError(f'the run has no result key {key!r}')
  return float(value)


def formatted(figure: Figure, result: Mapping) -> str:
  """`figure` as its run's `result` gives it, in the document's format."""
  value = value_of(result, figure.key)
  if figure.relative_to is not None:
    value = (value / figure.relative_to - 1.0) * 100.0
  return FORMATS[figure.fmt][0](value)


class Row(NamedTuple):
  """A figure, as the document has it and as its run gives it now."""

  figure: Figure
  in_doc: str
  now: str

  @property
  def stale(self) -> bool:
    return self.in_doc != self.now


def rows(
  figures: Sequence[Figure],
  docs: Mapping[str, str],
  results: Mapping[Run, Mapping],
) -> list[Row]:
  """Each figure in its document (`docs`: file -> text) and from its
  run's result (`results`: run -> result dict)."""
  out = []
  for f in figures:
    start, end = locate(docs[f.file], f)
    out.append(Row(f, docs[f.file][start:end], formatted(f, results[f.run])))
  return out


def rewritten(text: str, file: str, table: Sequence[Row]) -> str:
  """`text`, the document `file`, with its stale figures replaced."""
  spans = [
    (*locate(text, r.figure), r.now)
    for r in table
    if r.figure.file == file and r.stale
  ]
  for start, end, now in sorted(spans, reverse=True):
    text = text[:start] + now + text[end:]
  return text


def table(table_rows: Sequence[Row]) -> str:
  """The printed table: file, figure in the document, figure now (with
  `STALE` where they differ), command."""
  lines = ['file          in doc    now       command']
  for r in table_rows:
    mark = '  STALE' if r.stale else ''
    lines.append(
      f'{r.figure.file:<13} {r.in_doc:<9} {r.now:<9} '
      f'{command(r.figure.run)}{mark}'
    )
  return '\n'.join(lines)
