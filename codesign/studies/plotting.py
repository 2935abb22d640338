"""PNG plots of the studies, drawn the same way every time.

matplotlib runs on the Agg backend (no display), with a fixed style and no
timestamp or version in the PNG metadata, so the same data give the same
file on the same matplotlib version. Every function takes plain numpy data
and a path, draws one figure and closes it.
"""

import pathlib
import textwrap
from typing import NamedTuple

import matplotlib

matplotlib.use('Agg')

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from codesign.core.errors import printable  # noqa: E402

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


def _save(fig, path, rect=None) -> pathlib.Path:
  """Writes `fig` to `path` and closes it; `rect`: the part of the figure
  (left, bottom, right, top, as fractions) the axes are laid out in."""
  path = pathlib.Path(path)
  _names_as_data(fig)
  fig.tight_layout(rect=rect)
  # No 'Software' entry: the file does not depend on the matplotlib build.
  fig.savefig(path, format='png', metadata={'Software': None})
  plt.close(fig)
  return path


def _as_data(text: str) -> str:
  """A name as matplotlib draws it literally: control characters and lone
  surrogates (which the font code cannot draw) escaped as the scripts
  print them, and '$' escaped so that it never starts mathtext (which
  fails on a name such as '$\\frac$')."""
  return printable(text, keep='\n').replace('$', r'\$')


def _names_as_data(fig) -> None:
  """Draws every text of `fig` as data (`_as_data`): titles, labels,
  legends, annotations and tick labels given as names (a fixed list,
  whose formatter is wrapped: it writes the labels again at each draw);
  tick labels that a number formatter writes (in mathtext) are left as
  they are."""
  numbers = set()
  named = (matplotlib.ticker.FixedFormatter, matplotlib.ticker.FuncFormatter)
  for ax in fig.axes:
    for axis in (ax.xaxis, ax.yaxis):
      numbers.add(axis.get_offset_text())
      for fmt, ticks, setter in (
        (
          axis.get_major_formatter(),
          axis.get_major_ticks(),
          axis.set_major_formatter,
        ),
        (
          axis.get_minor_formatter(),
          axis.get_minor_ticks(),
          axis.set_minor_formatter,
        ),
      ):
        if isinstance(fmt, named):
          setter(
            matplotlib.ticker.FuncFormatter(
              lambda x, pos, f=fmt: _as_data(str(f(x, pos)))
            )
          )
        else:
          numbers.update(
            t for tick in ticks for t in (tick.label1, tick.label2)
          )
  for text in fig.findobj(matplotlib.text.Text):
    if text not in numbers:
      text.set_text(_as_data(text.get_text()))


def _drawable(y, log: bool) -> np.ndarray:
  """Which points a (log) axis can show: finite, and positive on a log
  axis (matplotlib cannot place zero or negative values there, and an
  axis with none left fails to draw)."""
  y = np.asarray(y, dtype=float)
  ok = np.isfinite(y)
  return ok & (y > 0) if log else ok


def _skipped_note(skipped: int, total: int, why: str) -> str:
  return f'{skipped} of {total} points not drawn: {why}' if skipped else ''


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
    panels: (y label with its unit, {platform: values of shape (N,)}) per
      panel (log y).
    spilling: platform -> (N,) booleans, tables partly in DDR.
    feasible: platform -> (N,) booleans, every memory tier fits.
    title: figure title.

  A solid line with filled dots: all tables in HBM. Dashed with hollow
  dots: spilling to host DDR. Grey crosses: infeasible (drawn for
  reference at the value the model computes, not a real operating point).
  Zero, negative and non-finite values cannot sit on the log axes: they
  are left out and counted in the title.
  """
  sizes_gb = np.asarray(sizes_gb, dtype=float)
  skipped = total = 0
  with plt.rc_context(_STYLE):
    fig, axes = plt.subplots(
      1, len(panels), figsize=(5.0 * len(panels) + 1.8, 4.2), squeeze=False
    )
    for ax, (ylabel, series) in zip(axes[0], panels, strict=True):
      drawn = False
      for k, (name, y) in enumerate(series.items()):
        color = f'C{k % 10}'
        good = _drawable(y, log=True)
        skipped += int(np.sum(~good))
        total += len(good)
        y = np.where(good, np.asarray(y, dtype=float), np.nan)
        ok = np.asarray(feasible[name]) & good
        sp = np.asarray(spilling[name]) & ok
        fit = ~np.asarray(spilling[name]) & ok
        bad = ~np.asarray(feasible[name]) & good
        y_ok = np.where(ok, y, np.nan)
        y_fit = np.where(fit | np.roll(fit, -1) & ok, y_ok, np.nan)
        ax.plot(sizes_gb, y_ok, '--', color=color, lw=1.2)
        ax.plot(sizes_gb, y_fit, '-', color=color, lw=1.8, label=name)
        ax.plot(sizes_gb[fit], y[fit], 'o', color=color, ms=4)
        ax.plot(sizes_gb[sp], y[sp], 'o', mfc='white', mec=color, ms=5, mew=1.2)
        ax.plot(sizes_gb[bad], y[bad], 'x', color=color, alpha=0.35, ms=4)
        drawn = drawn or bool(good.any())
      ax.set_xscale('log')
      if drawn:  # a log axis with nothing on it cannot place its ticks
        ax.set_yscale('log')
      ax.set_xlabel('embedding tables with optimizer state (GB)')
      ax.set_ylabel(ylabel)
    # The platforms, then what the line and marker styles mean (grey).
    handles, labels = axes[0][0].get_legend_handles_labels()
    for style, kw, label in (
      ('o-', {}, 'all tables in HBM'),
      ('o--', {'mfc': 'white'}, 'spilling to host DDR'),
      ('x', {'alpha': 0.35}, 'infeasible (for reference)'),
    ):
      (h,) = axes[0][0].plot([], [], style, color='0.4', ms=5, **kw)
      handles.append(h)
      labels.append(label)
    # Beside the last panel, where it hides no curve.
    axes[0][-1].legend(
      handles, labels, fontsize=8, loc='center left', bbox_to_anchor=(1.0, 0.5)
    )
    note = _skipped_note(skipped, total, 'zero, negative or not finite')
    fig.suptitle(
      title + '\nsolid/filled: in HBM; dashed/hollow: spilling to DDR; '
      'x: infeasible' + (f'\n{note}' if note else '')
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
    series: legend name -> values of shape (len(labels),); non-finite
      values are drawn as no bar and counted in the title.
    xlabel: what the bars measure, with its unit.
  """
  n = len(labels)
  k = len(series)
  skipped = 0
  with plt.rc_context(_STYLE):
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.28 * n * max(1, k / 1.5)))
    height = 0.8 / max(k, 1)
    y = np.arange(n)
    for i, (name, vals) in enumerate(series.items()):
      vals = np.asarray(vals, dtype=float)
      good = _drawable(vals, log=False)
      skipped += int(np.sum(~good))
      ax.barh(
        y + (i - (k - 1) / 2) * height,
        np.where(good, vals, 0.0),
        height,
        label=name,
      )
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.axvline(0.0, color='black', lw=0.8)
    ax.set_xlabel(xlabel)
    note = _skipped_note(skipped, n * k, 'not finite')
    ax.set_title(title + (f'\n{note}' if note else ''))
    ax.legend(fontsize=8, loc='lower right')
    return _save(fig, path)


class Points(NamedTuple):
  """Markers drawn beside the curves of `lines`, at their own x: e.g.
  measured cases and the model's prediction at each.

  Attributes:
    x: shape (M,), their x values.
    y: shape (M,), their y values (points a log axis cannot show are left
      out).
    label: the legend entry.
    marker: a matplotlib marker ('s' squares, 'x' crosses).
    color: a matplotlib colour.
    texts: a label written beside each point ('' for none), or empty.
  """

  x: np.ndarray
  y: np.ndarray
  label: str
  marker: str = 's'
  color: str = 'C3'
  texts: tuple[str, ...] = ()


def _draw_points(ax, points: Points, logx: bool, logy: bool) -> list:
  """Draws `points` on `ax` and returns the y values drawn."""
  x = np.asarray(points.x, dtype=float)
  y = np.asarray(points.y, dtype=float)
  good = _drawable(x, logx) & _drawable(y, logy)
  hollow = points.marker not in ('x', '+')
  ax.plot(
    x[good],
    y[good],
    ls='none',
    marker=points.marker,
    ms=7,
    mew=1.5,
    color=points.color,
    mfc='none' if hollow else points.color,
    label=points.label,
  )
  # Labels right of their points, below and above in turn, so that the
  # labels of neighbouring points (a node count and its double) do not
  # overlap; over the curves and markers, on a pale box.
  for i, (xi, yi, text, ok) in enumerate(
    zip(x, y, points.texts, good, strict=False)
  ):
    if text and ok:
      ax.annotate(
        text,
        (xi, yi),
        fontsize=7,
        xytext=(8, -3 if i % 2 == 0 else 3),
        textcoords='offset points',
        va='top' if i % 2 == 0 else 'bottom',
        color=points.color,
        zorder=5,
        bbox={'fc': 'white', 'ec': 'none', 'alpha': 0.8, 'pad': 1.0},
      )
  return y[good].tolist()


def _node_axis(ax, xs: np.ndarray) -> None:
  """A base-2 log x axis over the positive `xs`, ticked at each of them
  (node counts written plainly, not 2^k)."""
  ax.set_xscale('log', base=2)
  # Limits from x itself: series with no point left set none.
  ax.set_xlim(xs.min() / 1.25, xs.max() * 1.25)
  ax.set_xticks(xs, [f'{v:g}' for v in xs])
  ax.minorticks_off()


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
  hline_label: str | None = None,
  gap_reason: str = 'no value',
  reference: dict[str, np.ndarray] | None = None,
  points: tuple[Points, ...] = (),
  note: str = '',
) -> pathlib.Path:
  """Line plot of several series over a shared x.

  Args:
    x: shape (N,), shared x values (positive where `logx`).
    series: legend name -> values of shape (N,); NaN is a gap.
    xlabel, ylabel: axis labels, with units.
    logx: log x axis (base 2, for node counts).
    logy: log y axis.
    hline: a horizontal reference line (dotted), e.g. a target.
    hline_label: its legend entry.
    gap_reason: what a NaN means, for the legend ("target out of reach").
    reference: legend name -> values of shape (N,), drawn dashed in grey
      without markers (e.g. linear scaling).
    points: markers at their own x (`Points`), beside the curves.
    note: a line of small text under the axes ('' for none).

  Points a log axis cannot show (zero, negative, NaN or infinite) are left
  out; the series' legend entry says how many and why, so an empty or
  partial curve is never silent.
  """
  x = np.asarray(x, dtype=float)
  with plt.rc_context(_STYLE):
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    # The values on the y axis; a log axis takes its limits from them (a
    # reference line alone does not set matplotlib's data limits).
    shown = [hline] if hline is not None and (not logy or hline > 0) else []
    for name, y in series.items():
      y = np.asarray(y, dtype=float)
      good = _drawable(y, logy) & _drawable(x, logx)
      nan = int(np.sum(np.isnan(y)))
      other = int(np.sum(~good)) - nan
      notes = [f'{nan} of {len(y)} points not drawn: {gap_reason}'] * bool(nan)
      if other:
        notes.append(f'{other} not drawn: not positive and finite')
      label = name + (f' ({"; ".join(notes)})' if notes else '')
      ax.plot(x, np.where(good, y, np.nan), 'o-', ms=4, label=label)
      shown.extend(y[good].tolist())
    for name, y in (reference or {}).items():
      y = np.asarray(y, dtype=float)
      good = _drawable(y, logy) & _drawable(x, logx)
      ax.plot(x, np.where(good, y, np.nan), '--', color='grey', label=name)
      shown.extend(y[good].tolist())
    for pts in points:
      shown.extend(_draw_points(ax, pts, logx, logy))
    if hline is not None:
      ax.axhline(hline, color='black', lw=0.8, ls=':', label=hline_label)
    xs = np.concatenate([x, *(np.asarray(p.x, float) for p in points)])
    xs = np.unique(xs[_drawable(xs, logx)])
    if logx and xs.size:
      _node_axis(ax, xs)
    if logy and shown:  # a log axis with nothing on it cannot place ticks
      ax.set_yscale('log')
      ax.set_ylim(min(shown) / 1.5, max(shown) * 1.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    rect = None
    if note:
      note = textwrap.fill(note, 120)
      fig.text(0.01, 0.01, note, fontsize=7, ha='left', va='bottom')
      rect = (0, 0.03 * (note.count('\n') + 1) + 0.01, 1, 1)
    return _save(fig, path, rect)


# Colour families of the step components (`cost_model.COMPONENTS`), by the
# start of their names: one hue per kind, shades within it, so a stack
# reads as compute / embedding / communication / host at a glance.
_FAMILIES = (
  (('dense_',), 'Blues'),
  (('embedding_',), 'Greens'),
  (('alltoall_', 'allreduce_', 'host_transfer', 'socket_links'), 'Oranges'),
  (('overhead', 'host'), 'Greys'),
)


def component_colors(names: list[str]) -> dict[str, tuple]:
  """A colour per step component: the colormap of its family, shades
  spread from mid to dark; names of no family get tab10 colours."""
  colors, other = {}, 0
  for prefixes, cmap in _FAMILIES:
    members = [n for n in names if n.startswith(prefixes) and n not in colors]
    for i, n in enumerate(members):
      shade = 0.45 + 0.45 * (i / max(len(members) - 1, 1))
      colors[n] = matplotlib.colormaps[cmap](shade)
  for n in names:
    if n not in colors:
      colors[n] = matplotlib.colormaps['tab10'](other % 10)
      other += 1
  return colors


def step_breakdown(
  path,
  x: np.ndarray,
  seconds: dict[str, np.ndarray],
  title: str,
  xlabel: str,
  step_s: np.ndarray | None = None,
) -> pathlib.Path:
  """Stacked step components over categorical x: in ms, and as shares.

  Args:
    x: shape (N,), the categories (node counts).
    seconds: component -> seconds of shape (N,), each term alone, before
      overlap (`CostReport.breakdown`); coloured by kind of component
      (`component_colors`).
    title: figure title.
    xlabel: what x is.
    step_s: shape (N,), the step time in seconds (after overlap), marked
      on the ms panel; None: not marked.

  The left panel stacks milliseconds, so its column heights are the sum of
  the components (more than the step time wherever they overlap); the
  right one stacks each component's share of that sum. Non-finite or
  negative values are drawn as zero and counted in the title.
  """
  names = list(seconds)
  colors = component_colors(names)
  vals = {k: np.asarray(v, dtype=float) * 1e3 for k, v in seconds.items()}
  bad = sum(int(np.sum(~(np.isfinite(v) & (v >= 0)))) for v in vals.values())
  vals = {
    k: np.where(np.isfinite(v) & (v >= 0), v, 0.0) for k, v in vals.items()
  }
  total = sum(vals.values()) if vals else np.zeros(len(x))
  with plt.rc_context(_STYLE):
    fig, axes = plt.subplots(1, 2, figsize=(12.0, 4.8))
    pos = np.arange(len(x))
    for ax, share in zip(axes, (False, True), strict=True):
      bottom = np.zeros(len(x))
      for k in names:
        h = np.divide(vals[k], total, out=np.zeros(len(x)), where=total > 0)
        h = h if share else vals[k]
        ax.bar(pos, h, 0.7, bottom=bottom, label=k, color=colors[k])
        bottom = bottom + h
      ax.set_xticks(pos, [str(v) for v in x])
      ax.set_xlabel(xlabel)
    if step_s is not None:
      axes[0].plot(
        pos,
        np.asarray(step_s, dtype=float) * 1e3,
        '_',
        color='black',
        ms=40,
        mew=2,
        label='step time (after overlap)',
      )
      axes[0].legend(fontsize=7, loc='upper right')
    axes[0].set_ylabel('ms per step, components summed before overlap')
    axes[1].set_ylim(0.0, 1.0)
    axes[1].set_ylabel('share of the summed step components')
    # Top of the stack first, as the bars read.
    handles, labels = axes[1].get_legend_handles_labels()
    axes[1].legend(
      handles[::-1],
      labels[::-1],
      fontsize=7,
      loc='center left',
      bbox_to_anchor=(1.0, 0.5),
    )
    note = _skipped_note(bad, len(x) * len(names), 'negative or not finite')
    fig.suptitle(title + (f'\n{note} (drawn as 0)' if note else ''))
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
    (public, 's', 'public cases C1-C19, leave-one-case-out fit'),
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
