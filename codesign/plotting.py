"""PNG plots of the studies, drawn the same way every time.

matplotlib runs on the Agg backend (no display), with a fixed style and no
timestamp or version in the PNG metadata, so the same data give the same
file on the same matplotlib version. Every function takes plain numpy data
and a path, draws one figure and closes it.
"""

import pathlib

import matplotlib

matplotlib.use('Agg')

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

_STYLE = {
  'figure.dpi': 100,
  'savefig.dpi': 100,
  'font.size': 9,
  'axes.grid': True,
  'grid.alpha': 0.3,
  'axes.prop_cycle': matplotlib.cycler(
    color=[
      '#1f77b4',
      '#ff7f0e',
      '#2ca02c',
      '#d62728',
      '#9467bd',
      '#8c564b',
      '#e377c2',
      '#7f7f7f',
      '#bcbd22',
      '#17becf',
    ]
  ),
}


def _save(fig, path) -> pathlib.Path:
  path = pathlib.Path(path)
  fig.tight_layout()
  # No 'Software' entry: the file does not depend on the matplotlib build.
  fig.savefig(path, format='png', metadata={'Software': None})
  plt.close(fig)
  return path


def platform_curves(
  path,
  sizes_gb: np.ndarray,
  panels: list[tuple[str, dict[str, np.ndarray]]],
  spilling: dict[str, np.ndarray],
  feasible: dict[str, np.ndarray],
  title: str,
) -> pathlib.Path:
  """Metric-versus-model-size curves of several platforms, one panel each.

  Args:
    path: the PNG to write.
    sizes_gb: shape (N,), embedding size of each point in GB (x axis, log).
    panels: (y label, {platform: values of shape (N,)}) per panel (log y).
    spilling: platform -> (N,) booleans, tables partly in DDR.
    feasible: platform -> (N,) booleans, every memory tier fits.
    title: figure title.

  A solid line with filled dots: all tables in HBM. Dashed with hollow
  dots: spilling to host DDR. Grey crosses: infeasible (drawn for
  reference at the value the model computes, not a real operating point).
  """
  with plt.rc_context(_STYLE):
    fig, axes = plt.subplots(
      1, len(panels), figsize=(5.0 * len(panels), 4.2), squeeze=False
    )
    for ax, (ylabel, series) in zip(axes[0], panels, strict=True):
      for k, (name, y) in enumerate(series.items()):
        color = f'C{k % 10}'
        ok = feasible[name]
        sp = spilling[name] & ok
        fit = ~spilling[name] & ok
        y_ok = np.where(ok, y, np.nan)
        y_fit = np.where(fit | np.roll(fit, -1) & ok, y_ok, np.nan)
        ax.plot(sizes_gb, y_ok, '--', color=color, lw=1.2)
        ax.plot(sizes_gb, y_fit, '-', color=color, lw=1.8, label=name)
        ax.plot(sizes_gb[fit], y[fit], 'o', color=color, ms=4)
        ax.plot(sizes_gb[sp], y[sp], 'o', mfc='white', mec=color, ms=5, mew=1.2)
        ax.plot(sizes_gb[~ok], y[~ok], 'x', color=color, alpha=0.35, ms=4)
      ax.set_xscale('log')
      ax.set_yscale('log')
      ax.set_xlabel('embedding tables with optimizer state (GB)')
      ax.set_ylabel(ylabel)
    axes[0][0].legend(fontsize=8, loc='lower left')
    fig.suptitle(
      title + '\nsolid/filled: in HBM; dashed/hollow: spilling to DDR; '
      'x: infeasible'
    )
    return _save(fig, path)


def ranked_bars(
  path,
  labels: list[str],
  series: dict[str, np.ndarray],
  title: str,
  xlabel: str,
) -> pathlib.Path:
  """Horizontal grouped bars, one row per label, top row first.

  Args:
    labels: row names, already ranked.
    series: legend name -> values of shape (len(labels),).
  """
  n = len(labels)
  k = len(series)
  with plt.rc_context(_STYLE):
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.28 * n * max(1, k / 1.5)))
    height = 0.8 / k
    y = np.arange(n)
    for i, (name, vals) in enumerate(series.items()):
      ax.barh(y + (i - (k - 1) / 2) * height, vals, height, label=name)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.axvline(0.0, color='black', lw=0.8)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(fontsize=8, loc='lower right')
    return _save(fig, path)


def lines(
  path,
  x: np.ndarray,
  series: dict[str, np.ndarray],
  title: str,
  xlabel: str,
  ylabel: str,
  *,
  logx: bool = False,
  logy: bool = False,
  hline: float | None = None,
) -> pathlib.Path:
  """Simple line plot of several series over a shared x (NaN = gap)."""
  with plt.rc_context(_STYLE):
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for name, y in series.items():
      ax.plot(x, y, 'o-', ms=4, label=name)
    if hline is not None:
      ax.axhline(hline, color='black', lw=0.8, ls=':')
    if logx:
      ax.set_xscale('log', base=2)
    if logy:
      ax.set_yscale('log')
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(fig, path)


def stacked_shares(
  path,
  x: np.ndarray,
  shares: dict[str, np.ndarray],
  title: str,
  xlabel: str,
) -> pathlib.Path:
  """Stacked bars of shares (each column sums to 1) over categorical x."""
  with plt.rc_context(_STYLE):
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    pos = np.arange(len(x))
    bottom = np.zeros(len(x))
    for i, (name, s) in enumerate(shares.items()):
      color = matplotlib.colormaps['tab20'](i % 20)
      ax.bar(pos, s, 0.7, bottom=bottom, label=name, color=color)
      bottom = bottom + s
    ax.set_xticks(pos, [str(v) for v in x])
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel('share of the summed step components')
    ax.set_title(title)
    ax.legend(fontsize=7, loc='center left', bbox_to_anchor=(1.0, 0.5))
    return _save(fig, path)


def frontier(
  path,
  panels: list[dict],
  title: str,
) -> pathlib.Path:
  """Frontier curves with labelled reference points, one panel each.

  Args:
    panels: dicts with `x`, `y` (frontier points, sorted by x), `xlabel`,
      `ylabel`, and `points` ({label: (x, y)}) drawn as labelled markers;
      optional `cloud` ((M,), (M,)) of all candidate designs.
  """
  with plt.rc_context(_STYLE):
    fig, axes = plt.subplots(
      1, len(panels), figsize=(5.5 * len(panels), 4.5), squeeze=False
    )
    for ax, pan in zip(axes[0], panels, strict=True):
      if 'cloud' in pan:
        cx, cy = pan['cloud']
        ax.plot(cx, cy, '.', color='0.75', ms=3, label='searched designs')
      ax.plot(pan['x'], pan['y'], 'o-', color='C0', ms=4, label='frontier')
      for k, (name, (px, py)) in enumerate(sorted(pan['points'].items())):
        ax.plot(px, py, 's', color=f'C{(k + 1) % 10}', ms=6)
        ax.annotate(
          name, (px, py), fontsize=7, xytext=(4, 3), textcoords='offset points'
        )
      ax.set_xscale('log')
      ax.set_yscale('log')
      ax.set_xlabel(pan['xlabel'])
      ax.set_ylabel(pan['ylabel'])
      ax.legend(fontsize=8, loc='lower right')
    fig.suptitle(title)
    return _save(fig, path)


def calibration(path, local: list[dict], public: list[dict]) -> pathlib.Path:
  """Predicted against measured step time (s), log-log, with the identity
  and +-30% lines: the local validation cases (dots) and the public
  cases (squares; hollow: predicted from the priors alone).

  Args:
    local, public: case dicts with `name`, `measured` and `predicted`
      (s); public cases also `predicted_prior` (s).
  """
  fig, ax = plt.subplots(figsize=(5.5, 5.0), dpi=120)
  allv = []
  for cases, marker, label in (
    (local, 'o', 'local device (validation configs)'),
    (public, 's', 'public cases C1-C9, leave-one-case-out fit'),
  ):
    if not cases:
      continue
    m = [c['measured'] for c in cases]
    q = [c['predicted'] for c in cases]
    allv += m + q
    ax.scatter(m, q, marker=marker, label=label)
    if marker == 's':  # the priors, for comparison
      u = [c['predicted_prior'] for c in cases]
      allv += u
      ax.scatter(
        m,
        u,
        marker='s',
        facecolors='none',
        edgecolors='C1',
        label='public cases, sourced priors (no fit)',
      )
    for c in cases:
      short = c['name'].split('_')[0] if marker == 'o' else c['name']
      ax.annotate(
        short.replace('_', ' '),
        (c['measured'], c['predicted']),
        fontsize=7,
        xytext=(3, 3),
        textcoords='offset points',
      )
  lo, hi = min(allv) / 1.5, max(allv) * 1.5
  ax.plot([lo, hi], [lo, hi], 'k-', lw=1, label='identity')
  for f in (0.7, 1.3):
    ax.plot([lo, hi], [lo * f, hi * f], 'k:', lw=0.7)
  ax.set_xscale('log')
  ax.set_yscale('log')
  ax.set_xlim(lo, hi)
  ax.set_ylim(lo, hi)
  ax.set_xlabel('measured step time (s)')
  ax.set_ylabel('predicted step time (s)')
  ax.set_title('Cost model vs measurement (dotted: +-30%)')
  ax.legend(fontsize=7, loc='upper left')
  return _save(fig, path)
