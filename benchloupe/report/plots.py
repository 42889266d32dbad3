"""The report's figures, drawn with matplotlib (Agg) as SVG with text kept as text.

matplotlib is imported here only, when the first figure is drawn: ``benchloupe --help`` and the workbench never
load it. Labels from data (model names, item keys) are drawn with mathtext off (a ``$`` in a model name is a
dollar sign) and control characters escaped; matplotlib's SVG writer escapes ``<``, ``>``, ``&`` and quotes.
Large inputs are summarised before they are drawn (histograms, bands, the top rows), so a 5,000 x 14,000
benchmark draws hundreds of marks, not millions.
"""

from __future__ import annotations

import io
import re

import numpy as np

from benchloupe.textsafe import visible

MAX_LABELLED = 60  # rows a figure draws one by one with their names; beyond it, bands or the top rows
_RC = {"svg.fonttype": "none", "text.parse_math": False, "font.size": 9, "axes.titlesize": 10,
       "axes.spines.top": False, "axes.spines.right": False, "svg.image_inline": True}
BLUE, ORANGE, GREY, RED, GREEN = "#1f77b4", "#ff7f0e", "#7f7f7f", "#d62728", "#2ca02c"


def _figure(width: float, height: float, *, left: float = 0.75, bottom: float = 0.55, right: float = 0.15,
            top: float = 0.15):
    """A figure of *width* x *height* inches with fixed margins in inches (matplotlib's constrained layout measured
    half of each figure's time)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    matplotlib.rcParams.update(_RC)
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height)
    return fig


def svg(fig, key: str) -> str:
    """The figure as one ``<svg>`` element (no XML prolog), its ids prefixed by *key* so several figures can sit
    in one HTML page without sharing an id."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": key}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text[text.index("<svg"):], flags=re.DOTALL)
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", key) + "-"
    text = re.sub(r'id="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', text)
    return re.sub(r'(xlink:href|href)="#([^"]+)"|url\(#([^)]+)\)',
                  lambda m: (f'{m.group(1)}="#{prefix}{m.group(2)}"' if m.group(1) else f"url(#{prefix}{m.group(3)})"),
                  text)


def label(text: object, width: int = 40) -> str:
    """A data text as a figure label: control characters visible, cut to *width* characters."""
    s = visible(text)
    return s if len(s) <= width else s[: width - 1] + "…"


def histogram(values: np.ndarray, *, xlabel: str, bins: int = 30, marks: dict | None = None):
    fig = _figure(6.0, 2.6)
    ax = fig.subplots()
    counts, edges = np.histogram(values[np.isfinite(values)], bins=bins)
    ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color=BLUE, edgecolor="white", linewidth=0.4)
    for name, (x, colour) in (marks or {}).items():
        ax.axvline(x, color=colour, linewidth=1.5, label=name)
    if marks:
        ax.legend(frameon=False)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    return fig, counts, edges


def wright_map(theta: np.ndarray, b: np.ndarray, bins: int = 40):
    """Abilities (left, to the left) and difficulties (right) as histograms on one shared logit axis."""
    both = np.concatenate([theta[np.isfinite(theta)], b[np.isfinite(b)]])
    edges = np.linspace(both.min(), both.max(), bins + 1) if both.size else np.linspace(-1, 1, bins + 1)
    m, _ = np.histogram(theta[np.isfinite(theta)], edges)
    i, _ = np.histogram(b[np.isfinite(b)], edges)
    fig = _figure(6.0, 4.2)
    ax = fig.subplots()
    h = np.diff(edges)
    ax.barh(edges[:-1], -m / max(m.sum(), 1), height=h, align="edge", color=BLUE, label="models (ability θ)")
    ax.barh(edges[:-1], i / max(i.sum(), 1), height=h, align="edge", color=ORANGE, label="items (difficulty b)")
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_ylabel("logit scale")
    ax.set_xlabel("share of models (left) | share of items (right)")
    lim = max(np.abs(ax.get_xlim()))
    ax.set_xlim(-lim, lim)
    ax.xaxis.set_major_formatter(_abs_formatter())
    ax.legend(frameon=False, loc="upper right")
    return fig, m, i, edges


def _abs_formatter():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda x, _: f"{abs(x):.3g}")


def lines(xs: dict, *, xlabel: str, ylabel: str, bands: dict | None = None, marks: dict | None = None,
          logx: bool = False, width: float = 6.0, height: float = 3.0):
    """One line per name (``xs[name] = (x, y)``), optional shaded bands (``(x, lo, hi)``) and vertical marks."""
    fig = _figure(width, height)
    ax = fig.subplots()
    for name, (x, lo, hi) in (bands or {}).items():
        ax.fill_between(x, lo, hi, color=GREY, alpha=0.3, linewidth=0, label=name)
    for name, (x, y) in xs.items():
        ax.plot(x, y, marker="o" if len(x) <= 30 else None, markersize=3, linewidth=1.4, label=label(name, 30))
    for name, (x, colour) in (marks or {}).items():
        ax.axvline(x, color=colour, linewidth=1, linestyle="--", label=name)
    if logx:
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax.set_xscale("log")  # tick labels as plain numbers: mathtext is off, so 10^1 would print as TeX
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if len(xs) + len(bands or {}) + len(marks or {}) > 1:
        ax.legend(frameon=False, fontsize=8)
    return fig


def caterpillar(rank: np.ndarray, lo: np.ndarray, hi: np.ndarray, names: list[str]):
    """Rank intervals by rank: one labelled bar per model up to MAX_LABELLED models, else a shaded band."""
    n = len(rank)
    labelled = n <= MAX_LABELLED
    fig = _figure(6.0, max(2.8, 0.16 * n + 0.8) if labelled else 3.6, left=2.3 if labelled else 0.75)
    ax = fig.subplots()
    if labelled:
        y = np.arange(n)
        ax.hlines(y, lo, hi, color=BLUE, linewidth=2)
        ax.plot(rank, y, "o", color="black", markersize=2.5)
        ax.set_yticks(y, [label(s, 36) for s in names], fontsize=6)
        ax.invert_yaxis()
        ax.set_xlabel("rank (1 = best): point and 95% bootstrap interval")
    else:
        order = np.arange(1, n + 1)
        ax.fill_between(order, lo, hi, color=BLUE, alpha=0.35, linewidth=0, label="95% rank interval")
        ax.plot(order, rank, color="black", linewidth=0.8, label="point rank")
        ax.set_xlabel("models in rank order")
        ax.set_ylabel("rank (1 = best)")
        ax.invert_yaxis()
        ax.legend(frameon=False)
    return fig


def item_curves(panels: list[dict]):
    """Small multiples, one per item: observed share right per ability group (points with 95% intervals) and the
    fitted curve (line). Each panel: title, grid, fitted, centre, observed, lo, hi."""
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig = _figure(6.4, 2.0 * rows + 0.3, left=0.7, bottom=0.6, top=0.35)
    axes = np.atleast_1d(fig.subplots(rows, cols, sharey=True)).ravel()
    for ax, p in zip(axes, panels):
        ax.plot(p["grid"], p["fitted"], color=ORANGE, linewidth=1.4)
        ok = np.isfinite(p["observed"])
        ax.errorbar(p["centre"][ok], p["observed"][ok],
                    yerr=[np.maximum(p["observed"][ok] - p["lo"][ok], 0), np.maximum(p["hi"][ok] - p["observed"][ok], 0)],
                    fmt="o", color=BLUE, markersize=3, linewidth=0.8)
        ax.set_title(label(p["title"], 34), fontsize=8)
        ax.set_ylim(-0.03, 1.03)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.text(0.5, 0.02, "ability θ (groups of models)", ha="center", fontsize=8)
    fig.text(0.01, 0.5, "share right", va="center", rotation=90, fontsize=8)
    return fig


def heatmap(values: np.ndarray, rows: list[str], cols: list[str]):
    fig = _figure(7.0, max(2.6, 0.18 * len(rows) + 1.6), left=2.2, bottom=1.2, right=1.2)
    ax = fig.subplots()
    lim = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
    im = ax.imshow(np.ma.masked_invalid(values), cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto",
                   interpolation="nearest")
    ax.set_yticks(np.arange(len(rows)), [label(s, 32) for s in rows], fontsize=6)
    ax.set_xticks(np.arange(len(cols)), [label(s, 16) for s in cols], fontsize=6, rotation=90)
    cax = fig.add_axes((1 - 1.0 / 7.0, 0.2, 0.15 / 7.0, 0.6))
    fig.colorbar(im, cax=cax, label="standardised residual")
    return fig


def _intervals(fig, names: list[str], point: np.ndarray, lo: np.ndarray, hi: np.ndarray, colours: np.ndarray, *,
               linewidth: float, dots, fontsize: int, xlabel: str):
    """One row per name, top down: its interval as a line in its colour and its point as a dot (``dots``: one
    colour for all, or None for the rows' own)."""
    ax = fig.subplots()
    y = np.arange(len(names))
    ax.hlines(y, lo, hi, colors=colours, linewidth=linewidth)
    ax.scatter(point, y, s=10, zorder=3, **({"c": colours} if dots is None else {"color": dots}))
    ax.set_yticks(y, names, fontsize=fontsize)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    return ax


def forest(names: list[str], est: np.ndarray, lo: np.ndarray, hi: np.ndarray, flagged: np.ndarray):
    fig = _figure(6.4, max(2.4, 0.17 * len(names) + 0.9), left=2.3)
    ax = _intervals(fig, [label(s, 36) for s in names], est, lo, hi, np.where(flagged, RED, BLUE), linewidth=1.6,
                    dots=None, fontsize=6, xlabel="shift in mean residual, after − before the model's cutoff (95% "
                                                  "interval); red: flagged")
    ax.axvline(0, color="black", linewidth=0.6)
    return fig


def scatter_pairs(x: np.ndarray, y: np.ndarray, reversed_: np.ndarray):
    fig = _figure(5.0, 4.0)
    ax = fig.subplots()
    ax.scatter(x[~reversed_], y[~reversed_], s=14, color=BLUE, label="order kept")
    ax.scatter(x[reversed_], y[reversed_], s=22, color=RED, marker="x", label="reversed")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_xlabel("full-benchmark score difference (A − B)")
    ax.set_ylabel("low-DIF score difference (A − B)")
    ax.legend(frameon=False)
    return fig


def ecdf(z: np.ndarray, ecdf_: np.ndarray, target: np.ndarray, gaps: list[tuple[float, float, str]]):
    fig = _figure(6.0, 3.4)
    ax = fig.subplots()
    for k, (lo, hi, status) in enumerate(gaps):
        ax.axvspan(lo, hi, color=RED if status == "gap" else GREY, alpha=0.25, linewidth=0,
                   label=None if k else "top gaps (red: confirmed)")
    ax.step(z, ecdf_, where="post", color=BLUE, linewidth=1.2, label="difficulty ECDF")
    ax.plot(z, target, color=ORANGE, linewidth=1, linestyle="--", label="target (uniform)")
    ax.set_xlabel("difficulty on the 0–1 coverage scale")
    ax.set_ylabel("share of items at or below")
    ax.legend(frameon=False, fontsize=8)
    return fig


def gap_intervals(names: list[str], width: np.ndarray, lo: np.ndarray, hi: np.ndarray, confirmed: np.ndarray):
    fig = _figure(6.0, max(2.0, 0.22 * len(names) + 0.8), left=1.3)
    _intervals(fig, names, width, lo, hi, np.where(confirmed, RED, GREY), linewidth=2, dots="black", fontsize=7,
               xlabel="gap width (point) and its 95% interval; red: confirmed")
    return fig
