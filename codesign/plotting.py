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


def _label_points(ax, xs, ys, labels, fontsize=7.0) -> None:
  """Writes labels[i] next to point (xs[i], ys[i]), trying four places
  around it and leaving out a label whose box would leave the axes
  sideways or overlap one already written (approximate boxes: 0.6 em
  per character), so that a dense stretch of the curve keeps every other
  name readable."""
  ax.get_xlim()  # settles the autoscaled limits that transData uses
  ax.get_ylim()
  to_px = ax.transData
  px_per_pt = ax.figure.dpi / 72.0
  height = 1.2 * fontsize * px_per_pt
  frame = ax.bbox  # the axes in pixels: labels stay inside it
  placed = []  # (x0, y0, x1, y1) in pixels
  for x, y, text in zip(xs, ys, labels, strict=True):
    if not text:
      continue
    cx, cy = to_px.transform((x, y))
    width = 0.6 * fontsize * len(text) * px_per_pt
    for dx, dy in ((4, 3), (4, -3 - 1.2 * fontsize), (-4, 3), (-4, -12)):
      x0 = cx + dx * px_per_pt - (width if dx < 0 else 0.0)
      y0 = cy + dy * px_per_pt
      box = (x0, y0, x0 + width, y0 + height)
      inside = frame.x0 <= box[0] and box[2] <= frame.x1
      if inside and all(
        box[2] < b[0] or b[2] < box[0] or box[3] < b[1] or b[3] < box[1]
        for b in placed
      ):
        placed.append(box)
        ax.annotate(
          text,
          (x, y),
          fontsize=fontsize,
          xytext=(dx, dy),
          textcoords='offset points',
          ha='right' if dx < 0 else 'left',
          color='C0',
        )
        break


def frontier(
  path,
  panels: list[dict],
  title: str,
) -> pathlib.Path:
  """Frontier curves with labelled reference points, one panel each
  (log-log).

  Args:
    panels: dicts with `x`, `y` ((N,) frontier points, sorted by x, in the
      units `xlabel` and `ylabel` name), `xlabel`, `ylabel`, and `points`
      ({label: (x, y)}) drawn as labelled squares (the platform presets);
      optional `labels` (N names of the frontier points, written next to
      them where they do not overlap), `infeasible` (labels of `points`
      that are infeasible: hollow squares) and `cloud` ((M,), (M,)) of
      all candidate designs.
  """
  from matplotlib.lines import Line2D

  with plt.rc_context(_STYLE):
    fig, axes = plt.subplots(
      1, len(panels), figsize=(6.0 * len(panels), 4.8), squeeze=False
    )
    for ax, pan in zip(axes[0], panels, strict=True):
      handles = []
      if 'cloud' in pan:
        cx, cy = pan['cloud']
        (h,) = ax.plot(cx, cy, '.', color='0.75', ms=3)
        h.set_label('searched designs')
        handles.append(h)
      (h,) = ax.plot(pan['x'], pan['y'], 'o-', color='C0', ms=4)
      h.set_label('frontier: best design found per limit')
      handles.append(h)
      bad = set(pan.get('infeasible', ()))
      for name, (px, py) in sorted(pan['points'].items()):
        ax.plot(
          px,
          py,
          's',
          ms=6,
          color='C3',
          markerfacecolor='none' if name in bad else 'C3',
        )
        ax.annotate(
          name, (px, py), fontsize=7, xytext=(4, -9), textcoords='offset points'
        )
      if pan['points']:
        handles.append(
          Line2D([], [], ls='', marker='s', color='C3', label='platform preset')
        )
      if bad & set(pan['points']):
        handles.append(
          Line2D(
            [],
            [],
            ls='',
            marker='s',
            color='C3',
            markerfacecolor='none',
            label='preset whose tables do not fit',
          )
        )
      ax.set_xscale('log')
      ax.set_yscale('log')
      ax.set_xlabel(pan['xlabel'])
      ax.set_ylabel(pan['ylabel'])
      if len(pan['x']) and pan.get('labels'):
        _label_points(ax, pan['x'], pan['y'], pan['labels'])
      ax.legend(handles=handles, fontsize=7, loc='lower right')
    fig.suptitle(title)
    return _save(fig, path)
