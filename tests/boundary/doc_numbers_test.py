"""The registry of figures the documents quote, and its check and rewrite
on a tiny document with made-up results; then the real check of README.md
and WORKSPACE.md (`python3 -m experiments.doc_numbers`, the figures of
runs of seconds), and what the two documents must not hold."""

import pathlib
import re
import subprocess
import sys

import pytest

from codesign.boundary import doc_numbers as dn
from codesign.core.errors import InputError

ROOT = pathlib.Path(__file__).resolve().parents[2]

RUN_A = dn.evaluate('w', 'p', 'hugectr')
RUN_B = dn.evaluate('w', 'q', '', 'platform.nodes=4')
DOC = (
  'Intro.\n'
  '# On p it gives\n'
  '# 37.3M samples/s, +4.3% against the paper;\n'
  'on q it costs 64.0 of 380.8 MUSD.\n'
)
FIGS = (
  dn.Figure('DOC.md', 'On p it gives', RUN_A, 'thr', 'M1'),
  dn.Figure('DOC.md', 'samples/s,', RUN_A, 'thr', 'pct1', 35.78e6),
  dn.Figure('DOC.md', 'it costs', RUN_B, 'bill.network', 'millions1'),
  dn.Figure('DOC.md', 'costs <n> of', RUN_B, 'bill.total', 'millions1'),
)
RESULTS = {
  RUN_A: {'thr': 37.47e6},
  RUN_B: {'bill': {'network': 64.04e6, 'total': 400.0e6}},
}


def test_every_registered_anchor_is_found_once_in_its_document():
  docs = {
    name: (ROOT / name).read_text() for name in {f.file for f in dn.FIGURES}
  }
  for f in dn.FIGURES:
    start, end = dn.locate(docs[f.file], f)  # raises when missing
    assert end > start


def test_registry_names_commands_and_formats():
  for f in dn.FIGURES:
    assert f.fmt in dn.FORMATS
    assert dn.command(f.run).startswith('python3 -m experiments.')
  assert dn.selected(dn.FIGURES, False) == tuple(
    f for f in dn.FIGURES if not f.slow
  )
  assert len(dn.runs(dn.FIGURES)) < len(dn.FIGURES)  # runs are shared


def test_command_spells_the_flags_in_order():
  assert dn.command(RUN_B) == (
    'python3 -m experiments.evaluate --workload=w --platform=q '
    '--override=platform.nodes=4'
  )
  assert dn.arguments(RUN_B)[:2] == ['-m', 'experiments.evaluate']
  assert RUN_B.flag('stack', 'default') == 'default'
  assert RUN_B.values('override') == ['platform.nodes=4']


def test_check_finds_the_stale_figures():
  rows = dn.rows(FIGS, {'DOC.md': DOC}, RESULTS)
  assert [(r.in_doc, r.now, r.stale) for r in rows] == [
    ('37.3M', '37.5M', True),
    ('+4.3%', '+4.7%', True),
    ('64.0', '64.0', False),
    ('380.8', '400.0', True),
  ]
  text = dn.table(rows)
  assert text.count('STALE') == 3
  assert 'python3 -m experiments.evaluate --workload=w --platform=p' in text


def test_write_replaces_only_the_stale_figures_and_then_checks_clean():
  rows = dn.rows(FIGS, {'DOC.md': DOC}, RESULTS)
  new = dn.rewritten(DOC, 'DOC.md', rows)
  assert new == DOC.replace('37.3M', '37.5M').replace('+4.3%', '+4.7%').replace(
    '380.8', '400.0'
  )
  again = dn.rows(FIGS, {'DOC.md': new}, RESULTS)
  assert not any(r.stale for r in again)
  assert dn.rewritten(new, 'DOC.md', again) == new
  assert dn.rewritten(DOC, 'OTHER.md', rows) == DOC  # another file's rows


def test_anchor_survives_rewrapping():
  wrapped = DOC.replace('# On p it gives\n# ', '# On p\n#   it gives ')
  assert dn.rows(FIGS[:1], {'DOC.md': wrapped}, RESULTS)[0].in_doc == '37.3M'


@pytest.mark.parametrize(
  'doc, words',
  [
    ('nothing here', 'not found'),
    ('On p it gives 1M. On p it gives 2M.', 'found 2 times'),
    ('On p it gives many', 'not followed by a figure'),
  ],
)
def test_a_lost_anchor_is_one_sentence(doc, words):
  with pytest.raises(InputError, match=words):
    dn.locate(doc, FIGS[0])


def test_a_key_indexes_lists():
  result = {'platforms': {'z': {'thr': [1.0, 2.0, 3.0]}}}
  assert dn.value_of(result, 'platforms.z.thr.0') == 1.0
  assert dn.value_of(result, 'platforms.z.thr.-1') == 3.0


@pytest.mark.parametrize('key', ['bill.gone', 'bill.network.0', 'list.3'])
def test_a_missing_result_key_is_one_sentence(key):
  result = {**RESULTS[RUN_B], 'list': [1.0]}
  with pytest.raises(InputError, match=f"no result key '{key}'"):
    dn.value_of(result, key)


@pytest.mark.heavy
def test_the_quoted_figures_are_current():
  """Every registered figure of a run of seconds (evaluate in-process,
  scale_out twice as a subprocess; about 40 s cold on 2 cores) is what
  its command gives now: a change that moves one fails here until the
  documents are rewritten (`python3 -m experiments.doc_numbers --write`).
  The figures of runs of minutes (`--include_slow`) are not run here."""
  out = subprocess.run(
    [sys.executable, '-m', 'experiments.doc_numbers'],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
  assert 'STALE' not in out.stdout
  rows = [x for x in out.stdout.split('\n') if x.startswith(('README', 'WORK'))]
  assert len(rows) == len(dn.selected(dn.FIGURES, False)), out.stdout


def test_the_documents_speak_to_strangers():
  """No issue numbers, dates or work sessions in README.md and
  WORKSPACE.md (git history keeps those), and WORKSPACE.md stays a map."""
  for name in ('README.md', 'WORKSPACE.md'):
    text = (ROOT / name).read_text()
    for pattern in (
      r'issue [0-9]+',
      r'\b20[0-9]{2}-[0-9]{2}-[0-9]{2}\b',
      r'\bsessions?\b',
    ):
      found = re.search(pattern, text, re.IGNORECASE)
      assert not found, f'{name}: {found.group(0)!r}'
  assert len((ROOT / 'WORKSPACE.md').read_text().split('\n')) < 400
