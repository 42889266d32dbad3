"""The first sections of a report: Overview, Calibration, Items, Estimation and compression.

Each function takes the reading :class:`~.gather.Context` and returns a :class:`~.doc.Section`; a section whose
run is missing says which command makes it. Figures come with their numbers (:class:`~.doc.Table`) at full
precision; tables shown in the page are cut to their first rows and say so.
"""

from __future__ import annotations

import numpy as np

from benchloupe.store import runs

from . import plots
from .doc import Figure, Section, Table, fmt
from .gather import FIT_KINDS, Context, describe, shell_word

TOP_ROWS = 20  # rows a table shows in the page (its CSV or the stored run has them all)
CURVE_ITEMS = 6  # flagged items drawn with observed-vs-fitted curves


def figure(key: str, title: str, caption: str, alt: str, fig, data: Table) -> Figure:
    return Figure(key, title, caption, alt, plots.svg(fig, key), data)


def _col(df, name, default=np.nan) -> np.ndarray:
    return df[name].to_numpy(dtype=float, na_value=default) if name in df.columns else np.full(len(df), default)


# ---------------------------------------------------------------------------------------------------- overview
def overview(ctx: Context) -> Section:
    s = Section("overview", "Overview")
    sm = ctx.static()
    n_models, n_items = sm.correct.shape
    answered = sm.mask.sum(1)
    acc = np.where(answered > 0, (sm.correct == 1).sum(1) / np.maximum(answered, 1), np.nan)
    arena = ctx.conn.execute("SELECT count(*) FROM items WHERE benchmark_id = ? AND kind = 'arena'",
                             (ctx.benchmark_id,)).fetchone()[0]
    retired = ctx.conn.execute("SELECT count(*) FROM items WHERE benchmark_id = ? AND status = 'retired'",
                               (ctx.benchmark_id,)).fetchone()[0]
    cells = int(sm.mask.sum())
    rows = [("models with results", fmt(n_models)), ("active static items", fmt(n_items)),
            ("arena prompts", fmt(int(arena))), ("retired items", fmt(int(retired))),
            ("results (observed cells)", fmt(cells)),
            ("share of the matrix observed", fmt(cells / max(n_models * n_items, 1))),
            ("mean accuracy over models", fmt(float(np.nanmean(acc)) if n_models else None))]
    audit = ctx.read(s, "items", "Reliability and SEM")
    if audit is not None:
        rel = (audit["metrics"].get("reliability") or {}).get("all") or {}
        rows += [("marginal reliability (item audit's 2PL)", fmt(rel.get("marginal"))),
                 ("SEM of θ (logits)", fmt(rel.get("sem_theta"))),
                 ("Cronbach's α (models that answered every item)", fmt(rel.get("alpha"))),
                 ("SEM of the summed score (items)", fmt(rel.get("sem")))]
    s.table(["what", "value"], rows)
    if n_models:
        names = list(sm.models["name"])
        fig, counts, edges = plots.histogram(acc, xlabel="accuracy (share of answered items right)",
                                             marks={"mean": (float(np.nanmean(acc)), plots.ORANGE)})
        s.figure(figure(
            "overview-accuracy", "Accuracy of each model",
            f"How many of the {n_models:,} models reach each accuracy (share of the items they answered that they "
            "got right), in 30 equal bins; the orange line is the mean. A long left tail or a spike at 0 or 1 is "
            "worth a look. The CSV lists every model's accuracy and answered items.",
            f"Histogram of model accuracies from {np.nanmin(acc):.3f} to {np.nanmax(acc):.3f}, mean "
            f"{np.nanmean(acc):.3f}.", fig,
            Table(["model", "accuracy", "answered_items"],
                  [(n, float(a), int(k)) for n, a, k in zip(names, acc, answered)])))
    return s


# ------------------------------------------------------------------------------------------------- calibration
def calibration(ctx: Context) -> Section:
    s = Section("calibration", "Calibration")
    fit = ctx.read(s, "fit", "Wright map and test information", FIT_KINDS)
    if fit is not None:
        _wright_and_information(ctx, s, fit)
    boot = ctx.read(s, "bootstrap", "Rank intervals")
    if boot is not None:
        _caterpillar(s, boot, ctx)
    return s


def fit_parameters(ctx: Context, fit: dict):
    """(models frame, static items frame with chance) of a calibration run, read once per report."""
    key = ("fit", fit["id"])
    if key not in ctx.cache:
        ctx.cache[key] = _fit_parameters(ctx, fit)
    return ctx.cache[key]


def _fit_parameters(ctx: Context, fit: dict):
    models = runs.run_models(ctx.conn, fit["id"])
    items = runs.run_items(ctx.conn, fit["id"])
    if "source" in items.columns:
        items = items[items["source"].fillna("static") == "static"]
    chance = dict(zip(ctx.static().items["id"].tolist(), ctx.static().items["chance"].tolist()))
    use = (fit.get("config") or {}).get("chance", "stated") == "stated"  # estimate/none: drawn without a floor
    items = items.assign(c=[float(chance.get(i) or 0.0) if use else 0.0 for i in items["item_id"]])
    return models, items


def _wright_and_information(ctx: Context, s: Section, fit: dict) -> None:
    models, items = fit_parameters(ctx, fit)
    theta, b = _col(models, "theta"), _col(items, "difficulty")
    fig, m, i, edges = plots.wright_map(theta, b)
    s.figure(figure(
        "calibration-wright", "Wright map",
        "Models' abilities (left, blue) and items' difficulties (right, orange) on the fit's one logit scale, "
        "as shares per band. An item is answered right half the time (above its chance floor) by a model of "
        "ability equal to its difficulty, so items far above every model, or below them all, measure little. "
        "The CSV lists every model's θ and every item's b.",
        f"Wright map: {len(theta):,} abilities from {np.nanmin(theta):.2f} to {np.nanmax(theta):.2f}; "
        f"{len(b):,} difficulties from {np.nanmin(b):.2f} to {np.nanmax(b):.2f} logits.", fig,
        Table(["entity", "name", "logit"],
              [("model", n, float(t)) for n, t in zip(models["name"], theta)]
              + [("item", k, float(v)) for k, v in zip(items["key"], b)],
              source=f"benchloupe export run-models --run {fit['id']} (and run-items)")))
    a = np.nan_to_num(_col(items, "sharpness", 1.0), nan=1.0)
    c = _col(items, "c", 0.0)
    grid = np.linspace(min(np.nanmin(theta), np.nanmin(b)) - 1, max(np.nanmax(theta), np.nanmax(b)) + 1, 121)
    info = np.zeros_like(grid)
    ok = np.isfinite(b)
    for lo in range(0, int(ok.sum()), 2048):  # 14,000 items x 121 points in blocks
        bb, aa, cc = b[ok][lo:lo + 2048], a[ok][lo:lo + 2048], c[ok][lo:lo + 2048]
        p_star = 1 / (1 + np.exp(-aa[None, :] * (grid[:, None] - bb[None, :])))
        p = cc + (1 - cc) * p_star
        info += (aa ** 2 * ((p - cc) ** 2 / (1 - cc) ** 2) * (1 - p) / np.maximum(p, 1e-300)).sum(1)
    sem = 1 / np.sqrt(np.maximum(info, 1e-300))
    fig = plots.lines({"test information": (grid, info)}, xlabel="ability θ (logits)", ylabel="Fisher information")
    peak = float(grid[int(np.argmax(info))])
    s.figure(figure(
        "calibration-information", "Test information curve",
        "How precisely the whole benchmark measures a model of each ability: the sum over items of the fitted "
        "curve's Fisher information (with each item's chance level as its floor when the fit used one). Where "
        "it is high, close models are told apart; the standard error of θ is 1/√information (in the CSV).",
        f"Test information curve peaking at θ = {peak:.2f} with information {float(info.max()):.1f}.", fig,
        Table(["theta", "information", "sem"], [(float(g), float(v), float(e)) for g, v, e in zip(grid, info, sem)])))


def _informative(ctx: Context, s: Section, fit: dict) -> None:
    """The 10 most and 10 least informative items by the fit's Fisher score."""
    _, items = fit_parameters(ctx, fit)
    fisher = _col(items, "fisher")
    if not np.isfinite(fisher).any():
        return
    b, a = _col(items, "difficulty"), np.nan_to_num(_col(items, "sharpness", 1.0), nan=1.0)
    order = np.argsort(-np.nan_to_num(fisher, nan=-np.inf), kind="stable")
    cols = ["item", "group", "difficulty", "sharpness", "Fisher score"]

    def rows(idx):
        return [(items["key"].iat[k], items["group"].iat[k], fmt(b[k]), fmt(a[k]), fmt(fisher[k])) for k in idx]
    s.para("The most and least informative items (the calibration's Fisher score, averaged over the fitted models; "
           "`benchloupe compress` ranks them all and can retire the least informative):")
    s.table(cols, rows(order[:10]), note=f"most informative 10 of {len(items):,}")
    s.table(cols, rows(order[::-1][:10]), note=f"least informative 10 of {len(items):,}")


def _caterpillar(s: Section, boot: dict, ctx: Context) -> None:
    m = runs.run_models(ctx.conn, boot["id"])
    m = m[np.isfinite(_col(m, "rank"))].sort_values("rank", kind="stable")
    if m.empty:
        s.para("The bootstrap run stored no ranks.")
        return
    rank, lo, hi = _col(m, "rank"), _col(m, "rank_lo"), _col(m, "rank_hi")
    fig = plots.caterpillar(rank, lo, hi, list(m["name"]))
    B = boot["metrics"].get("B", "?")
    s.figure(figure(
        "calibration-ranks", "Rank intervals (caterpillar)",
        f"Each model's rank (1 = best) with its 95% interval from the question-level cluster bootstrap "
        f"({B} replicates): models whose intervals overlap are not reliably ordered by this benchmark. "
        + ("Drawn as a band over the models in rank order (too many to name); the CSV names each one."
           if len(m) > plots.MAX_LABELLED else ""),
        f"Rank intervals of {len(m):,} models; median interval width "
        f"{float(np.median(hi - lo)):.1f} ranks.", fig,
        Table(["model", "theta", "se", "rank", "rank_lo", "rank_hi"],
              [(n, float(t), float(e), float(r), float(a), float(z)) for n, t, e, r, a, z in
               zip(m["name"], _col(m, "theta"), _col(m, "se"), rank, lo, hi)],
              source=f"benchloupe export run-models --run {boot['id']}")))


# ------------------------------------------------------------------------------------------------------- items
def items(ctx: Context) -> Section:
    s = Section("items", "Items")
    audit = ctx.read(s, "items", "Item health")
    fit = ctx.latest(*FIT_KINDS)
    if audit is None:
        if fit is not None:
            s.runs.append(describe(fit))
            _informative(ctx, s, fit)
        return s
    table = runs.load_artifact(ctx.conn, audit["id"], "table")
    reasons = table["reasons"].fillna("").astype(str)
    flagged = table[reasons != ""]
    counts = audit["metrics"].get("reasons") or {}
    s.para(f"{len(flagged):,} of {len(table):,} items are flagged by the item audit "
           f"({', '.join(f'{k} {v}' for k, v in counts.items() if v) or 'no reason'}). Each is a question for "
           "the curator, not a verdict: triage them with `benchloupe flags "
           f"{shell_word(ctx.benchmark)} --kind item` or on the Items screen.")
    if flagged.empty:
        if fit is not None:
            s.runs.append(describe(fit))
            _informative(ctx, s, fit)
        return s
    head = flagged.head(TOP_ROWS)
    ids = [int(i) for i in head["item_id"]]
    text = dict(ctx.conn.execute(f"SELECT id, text FROM items WHERE id IN ({','.join('?' * len(ids))})", ids))
    rows = [(r["key"], r["reasons"], fmt(r["n_answers"]), fmt(r["p_right"]), fmt(r["r_rest"]),
             f"{fmt(r['slope'])} [{fmt(r['slope_lo'])}, {fmt(r['slope_hi'])}]", _cut(text.get(int(r["item_id"]), "")))
            for _, r in head.iterrows()]
    s.table(["item", "reasons", "answers", "share right", "rest correlation", "slope [95%]", "text"], rows,
            note=f"first {len(rows)} of {len(flagged):,} flagged items (all: `benchloupe flags {shell_word(ctx.benchmark)} "
                 "--kind item`)" if len(flagged) > TOP_ROWS else f"all {len(flagged)} flagged items")
    if fit is None:
        s.missing.append("Observed-vs-fitted curves need a calibration: " + ctx.missing("fit"))
    else:
        s.runs.append(describe(fit))
        _item_curves(ctx, s, fit, flagged)
    _option_tables(ctx, s, audit, table, flagged)
    if fit is not None:
        _informative(ctx, s, fit)
    return s


def _cut(text: str, n: int = 80) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _item_curves(ctx: Context, s: Section, fit: dict, flagged) -> None:
    models, params = fit_parameters(ctx, fit)
    sm = ctx.static()
    theta_of = dict(zip(models["model_id"].tolist(), _col(models, "theta")))
    theta = np.array([theta_of.get(i, np.nan) for i in sm.models["id"].tolist()])
    col_of = {int(i): k for k, i in enumerate(sm.items["id"].tolist())}
    par = {int(i): (b, a, c) for i, b, a, c in zip(params["item_id"], _col(params, "difficulty"),
                                                    _col(params, "sharpness", 1.0), _col(params, "c", 0.0))}
    panels, data = [], []
    for _, r in flagged.iterrows():
        iid = int(r["item_id"])
        if iid not in col_of or iid not in par or len(panels) >= CURVE_ITEMS:
            continue
        y, seen = sm.correct[:, col_of[iid]], sm.mask[:, col_of[iid]] & np.isfinite(theta)
        if seen.sum() < 10:
            continue
        b, a, c = par[iid]
        groups = int(min(10, max(2, seen.sum() // 10)))
        th, yy = theta[seen], y[seen].astype(float)
        order = np.argsort(th, kind="stable")
        chunks = np.array_split(order, groups)
        centre = np.array([th[k].mean() for k in chunks])
        n = np.array([len(k) for k in chunks], float)
        obs = np.array([yy[k].mean() for k in chunks])
        lo, hi = _wilson(obs, n)
        grid = np.linspace(th.min() - 0.5, th.max() + 0.5, 60)
        a = 1.0 if not np.isfinite(a) else a
        fitted = c + (1 - c) / (1 + np.exp(-a * (grid - b))) if np.isfinite(b) else np.full_like(grid, np.nan)
        panels.append({"title": f"{r['key']} ({r['reasons']})", "grid": grid, "fitted": fitted, "centre": centre,
                       "observed": obs, "lo": lo, "hi": hi})
        expected = c + (1 - c) / (1 + np.exp(-a * (centre - b)))
        data += [(r["key"], g + 1, int(n[g]), float(centre[g]), float(obs[g]), float(lo[g]), float(hi[g]),
                  float(expected[g])) for g in range(groups)]
    if not panels:
        return
    s.figure(figure(
        "items-curves", "Observed against fitted, flagged items",
        f"For the first {len(panels)} flagged items: the models are sorted by fitted ability and cut into equal "
        "groups; each point is the share of a group that got the item right (with its 95% Wilson interval), the "
        "line is the calibration's fitted curve. Points far from the line (a falling pattern, a flat one, or "
        "strong models failing) are what the flag is about.",
        f"Observed-versus-fitted curves for {len(panels)} flagged items.", plots.item_curves(panels),
        Table(["item", "group", "models", "mean_theta", "observed", "lo95", "hi95", "fitted"], data)))


def _wilson(p: np.ndarray, n: np.ndarray, z: float = 1.959963984540054) -> tuple[np.ndarray, np.ndarray]:
    d = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / d
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return mid - half, mid + half


def _option_tables(ctx: Context, s: Section, audit: dict, table, flagged) -> None:
    cards = runs.load_artifact(ctx.conn, audit["id"], "cards") or {}
    shares = cards.get("option_shares")
    if shares is None or shares.ndim != 3 or shares.shape[2] == 0:
        s.para("Option tables: this benchmark stores no chosen options (import the per-option answers to see "
               "which distractor strong models pick).")
        return
    index = {int(i): k for k, i in enumerate(table["item_id"].tolist())}
    shown = 0
    for _, r in flagged.iterrows():
        k = index.get(int(r["item_id"]))
        if k is None or shown >= CURVE_ITEMS:
            continue
        sh = shares[k]
        choices = r.get("choices") if isinstance(r.get("choices"), list) else []
        labels = [str(choices[j]) if j < len(choices) else f"option {j}" for j in range(sh.shape[1])]
        if not np.isfinite(sh).any():
            continue
        rows = [(labels[j] + (" (key)" if labels[j] == str(r.get("answer")) else ""),
                 *[fmt(float(sh[q, j])) for q in range(sh.shape[0])]) for j in range(sh.shape[1])]
        s.table(["option"] + [f"ability quarter {q + 1}" for q in range(sh.shape[0])], rows,
                note=f"{r['key']}: share of each ability quarter (1 = weakest) choosing each option")
        shown += 1


# ------------------------------------------------------------------------------------ estimation and compression
def compression(ctx: Context) -> Section:
    s = Section("compression", "Estimation and compression")
    comp = ctx.read(s, "compress", "Subset recovery",
                    where=lambda r: runs.load_table(ctx.conn, r["id"], "recovery_summary") is not None)
    if comp is not None:
        summ = runs.load_artifact(ctx.conn, comp["id"], "recovery_summary")
        curves, bands = {}, {}
        for strategy, g in summ.groupby("strategy", sort=False):
            g = g.sort_values("fraction")
            x = g["fraction"].to_numpy(float) * 100
            if strategy == "random":
                bands["random subsets (range over draws)"] = (x, g["spearman_lo"].to_numpy(float),
                                                              g["spearman_hi"].to_numpy(float))
            curves[strategy] = (x, g["spearman_mean"].to_numpy(float))
        fig = plots.lines(curves, bands=bands, xlabel="share of items kept (%)", logx=True,
                          ylabel="Spearman ρ with the full ranking")
        s.figure(figure(
            "compression-recovery", "Subset recovery",
            "How well a subset of the items recovers the full benchmark's ranking of the models (Spearman ρ), by "
            "the share of items kept, for each selection strategy; the grey band is the range over random subsets "
            "of the same size (paper 000's control). A strategy is worth using where it stays above the band.",
            f"Subset recovery curves of {summ['strategy'].nunique()} strategies over "
            f"{summ['fraction'].nunique()} subset sizes.", fig,
            Table(list(summ.columns), [tuple(r) for r in summ.itertuples(index=False)])))
    val = ctx.read(s, "validate", "Prediction error vs k", ("compress",),
                   where=lambda r: "estimate_validation" in runs.artifact_names(ctx.conn, r["id"]))
    if val is None:
        return s
    ev = runs.load_artifact(ctx.conn, val["id"], "estimate_validation")
    if not hasattr(ev, "columns") or "k" not in ev.columns or "mae" not in ev.columns:
        return s
    sel = "targeted" if "selection" in ev.columns and (ev["selection"] == "targeted").any() else None
    shown = ev[ev["selection"] == sel] if sel else ev
    curves = {}
    for key, g in (shown.groupby("estimator", sort=False) if "estimator" in shown.columns else [("estimate", shown)]):
        g = g.sort_values("k")
        curves[str(key)] = (g["k"].to_numpy(float), g["mae"].to_numpy(float))
    fig = plots.lines(curves, xlabel="items a new model answers (k)", logx=True,
                      ylabel="mean absolute error (accuracy points)")
    s.figure(figure(
        "compression-prediction", "Prediction error against k",
        "Cross-validated error of the full-benchmark accuracy predicted for a held-out model that answered only "
        f"k items, for each estimator{' on the targeted selection' if sel else ''} (every selection is in the "
        "CSV): lower is better; where a line flattens, more items buy little. 'ours' is benchloupe's estimate.",
        f"Prediction error against k for {len(curves)} estimators.", fig,
        Table(list(ev.columns), [tuple(r) for r in ev.itertuples(index=False)])))
    return s
