"""Stacks declare where they run (issue 21): the trainers and device
makers of every preset, the default stack of each trainer, and the one
sentence that refuses a stack on a platform it cannot train."""

import numpy as np
import pytest

from codesign.boundary import inputs
from codesign.core.errors import InputError
from codesign.spec import catalog, platform_presets, stack_presets
from codesign.spec import stack as stack_lib
from codesign.spec.hardware import TRAINERS


@pytest.mark.parametrize('name', sorted(stack_presets.PRESETS))
def test_every_preset_declares_where_it_runs_with_a_source(name):
  s = stack_presets.get(name)
  assert s.trainers and set(s.trainers) <= set(TRAINERS)
  assert s.vendors and set(s.vendors) <= set(stack_lib.VENDORS)
  sources = dict(s.sources)
  assert sources['trainers'] and sources['vendors']


def test_part_vendors():
  assert catalog.vendor('H100-SXM5-80GB') == 'nvidia'
  assert catalog.vendor('MI300X-OAM') == 'amd'
  assert catalog.vendor('EPYC-7742 (Rome)') == 'amd'
  assert catalog.vendor('Xeon-Platinum-8180 (Skylake-SP)') == 'intel'
  assert catalog.vendor('Zion-OAM (assumed V100-class)') is None
  # Every modelled catalog part has a known maker.
  for n in (*catalog.accelerator_names(), *catalog.raw()['cpus']):
    assert catalog.vendor(n) in stack_lib.VENDORS, n


def test_default_stack_follows_the_trainer():
  assert stack_presets.default_for('accelerator') == 'torchrec'
  assert stack_presets.default_for('cpu') == 'ipex_cpu'
  _, p, _, s = inputs.resolve('criteo_kaggle', 'cpu_2s')
  assert p.trainer == 'cpu' and s.name == 'ipex_cpu'
  _, _, _, s = inputs.resolve('criteo_kaggle', 'dgx_a100_80gb')
  assert s.name == 'torchrec'


def test_an_impossible_pair_is_one_sentence():
  with pytest.raises(InputError) as e:
    inputs.resolve('criteo_kaggle', 'cpu_2s', stack='hugectr')
  msg = str(e.value)
  assert msg.count('\n') == 0
  assert "stack 'hugectr' does not run on a cpu trainer" in msg
  assert "'cpu_2s'" in msg
  with pytest.raises(InputError, match='does not run on an accelerator'):
    inputs.resolve('criteo_kaggle', 'dgx_h100', stack='ipex_cpu')


def test_vendor_mismatch():
  hugectr = stack_presets.get('hugectr')
  assert stack_lib.mismatch(hugectr, 'accelerator', 'nvidia') is None
  assert 'amd' in stack_lib.mismatch(hugectr, 'accelerator', 'amd')
  # An unknown maker (a preset's own part) is not refused.
  assert stack_lib.mismatch(hugectr, 'accelerator', None) is None
  zion = platform_presets.get('zion')
  assert stack_presets.check_runs_on(hugectr, zion) is hugectr


def test_every_platform_preset_has_a_default_stack_that_runs_on_it():
  for name in platform_presets.PLATFORMS:
    p = platform_presets.get(name)
    s = stack_presets.get(stack_presets.default_for(p.trainer))
    assert stack_presets.check_runs_on(s, p) is s


def test_proposal_parts_follow_the_stack_vendors():
  from codesign.studies import proposal_search

  hugectr = stack_presets.get('hugectr')
  args = proposal_search.vendor_parts({}, 'accelerator', hugectr)
  assert args['accelerators']
  assert all(catalog.vendor(n) == 'nvidia' for n in args['accelerators'])
  torchrec = stack_presets.get('torchrec')
  # Nothing dropped: the default space is left as it was.
  assert proposal_search.vendor_parts({}, 'accelerator', torchrec) == {}
  with pytest.raises(InputError, match='--cpu_stack'):
    proposal_search.trainer_stacks(torchrec, hugectr)


def test_collective_library_per_stack():
  """The CPU stack runs oneCCL (Intel's MLPerf v0.7 submission:
  --dist-backend=ccl), the GPU stacks NCCL; another library is refused
  with one sentence."""
  lib = {
    n: stack_presets.get(n).collective_library for n in stack_presets.PRESETS
  }
  assert lib.pop('ipex_cpu') == 'oneccl'
  assert set(lib.values()) == {'nccl'}
  assert (
    'oneCCL'
    in dict(stack_presets.get('ipex_cpu').sources)['collective_library']
  )
  import dataclasses

  bad = dataclasses.replace(
    stack_presets.get('ipex_cpu'), collective_library='mpi'
  )
  assert any('collective_library' in e for e in stack_lib.problems(bad))


def test_a_release_by_year_differs_from_the_newest_where_it_did():
  """`NAME@YEAR` is the preset as its software stood that year: each
  field it changes cites its source; the bare name is the newest."""
  old, new = stack_presets.get('ipex_cpu@2020'), stack_presets.get('ipex_cpu')
  assert (old.embedding_kernel, new.embedding_kernel) == ('per_table', 'fused')
  assert (old.update_path, new.update_path) == ('sparse_grad', 'fused')
  assert (old.mlp_fusion, new.mlp_fusion) == ('none', 'epilogue')
  assert old.name == 'ipex_cpu@2020' and new.name == 'ipex_cpu'
  assert 'training_results_v0.7' in dict(old.sources)['embedding_kernel']
  nv_old, nv_new = (
    stack_presets.get(n) for n in ('nvidia_pytorch@2020', 'nvidia_pytorch')
  )
  assert nv_old.graph_scope == 'none'
  assert nv_new.graph_scope == 'forward_backward'
  # A year with two releases names the earlier by its month: NVIDIA's
  # first DLRM (April 2020) ran PyTorch's own modules, one table at a time.
  first = stack_presets.get('nvidia_pytorch@2020-04')
  assert first.name == 'nvidia_pytorch@2020-04'
  assert (first.embedding_kernel, nv_old.embedding_kernel) == (
    'per_table',
    'fused',
  )
  assert not first.fused_interaction and nv_old.fused_interaction
  assert (first.mlp_fusion, first.graph_scope) == ('none', 'none')
  assert '23a6382' in dict(first.sources)['embedding_kernel']
  for bad in ('nvidia_pytorch@2020-4', 'nvidia_pytorch@2020-05'):
    with pytest.raises(InputError):
      stack_presets.get(bad)
  h21, h = stack_presets.get('hugectr@2021'), stack_presets.get('hugectr')
  assert (h21.planner, h.planner) == ('hybrid', 'auto')
  assert 'IB_NVLink_Hier' in dict(h21.sources)['planner']
  # MLPerf v1.0 (21.05) before v1.1's overlaps and precomputed indices.
  h05 = stack_presets.get('hugectr@2021-05')
  assert (h05.allreduce_overlap, h21.allreduce_overlap) == (False, True)
  assert h05.hybrid_kernels > h21.hybrid_kernels
  # The configs' threshold constants: defaults, v1.1's efficiency 0.5,
  # v2.1's 23.75 GB/s all-to-all and p_dup_max 0.03.
  h22 = stack_presets.get('hugectr@2022')
  ratios = [x.hybrid_bandwidth_ratio for x in (h05, h21, h22)]
  np.testing.assert_allclose(ratios, [1.9 / 1.3, 0.95 / 1.3, 23.75 / 130])
  assert (h21.hybrid_p_dup_max, h22.hybrid_p_dup_max) == (0.01, 0.03)
  for name in stack_presets.version_names():
    s = stack_presets.get(name)
    base = stack_presets.get(stack_presets.family(name))
    changed = [
      k
      for k in stack_lib.leaf_paths(s) + list(stack_presets.CHOICE_FIELDS)
      if getattr(s, k) != getattr(base, k)
    ]
    for k in changed:
      assert dict(s.sources)[k].startswith(name), (name, k)


@pytest.mark.parametrize(
  'name, words',
  [
    ('hugectr@2019', 'no hugectr release of 2019 is described'),
    ('hugectr@x', "unknown stack preset 'hugectr@x'"),
    ('jax_xla@2022', "unknown stack preset 'jax_xla@2022'"),
  ],
)
def test_an_unknown_release_is_one_sentence(name, words):
  with pytest.raises(InputError) as e:
    stack_presets.get(name)
  assert words in str(e.value)
