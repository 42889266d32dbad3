"""The later sections of a report: Anomalies and contamination, Near-tie audit, Coverage, Decisions and
Provenance (see :mod:`.sections` for the conventions)."""

from __future__ import annotations

import json
import time

import numpy as np

from benchloupe import __version__
from benchloupe.store import runs

from . import plots
from .doc import Section, Table, fmt
from .gather import Context, all_settings, shell_word
from .sections import TOP_ROWS, _col, _cut, figure

SCATTER_POINTS = 2000  # near-tie pairs drawn (5,000 x 14,000: 20,557 pairs)
HEAT_ROWS, HEAT_COLS, HEAT_CELLS = 25, 30, 400  # the heat map: top models x top items among the top cells
FOREST_ROWS = 40

STATUS_WORDS = {
    "no_significant_excess_detected": "the low-DIF recomposition reverses near-tie pairs no more often than matched "
                                      "random recompositions do; a non-significant excess is not evidence that the "
                                      "rankings are equivalent, only that this audit found no family-DIF effect",
    "excess_sensitivity_detected": "the low-DIF recomposition reverses more near-tie pairs than matched random "
                                   "recompositions do: family DIF moves close rankings on this benchmark",
    "insufficient_eligible_pairs": "too few near-tie pairs to test; the audit says nothing either way",
    "undefined_random_controls": "the random controls left no eligible pair to compare with, so no p-value",
}


# ------------------------------------------------------------------------------------- anomalies, contamination
def anomalies(ctx: Context) -> Section:
    s = Section("anomalies", "Anomalies and contamination")
    run = ctx.read(s, "anomalies", "Anomaly candidates")
    if run is not None:
        _heatmap(ctx, s, run)
    con = ctx.read(s, "contamination", "Contamination windows")
    if con is not None:
        _forest(ctx, s, con)
    return s


def _heatmap(ctx: Context, s: Section, run: dict) -> None:
    total = ctx.conn.execute("SELECT count(*) FROM flags WHERE run_id = ? AND kind = 'anomaly'",
                             (run["id"],)).fetchone()[0]
    rows = ctx.conn.execute(
        "SELECT m.name, i.key, f.score, f.payload, f.state FROM flags f JOIN models m ON m.id = f.model_id"
        " JOIN items i ON i.id = f.item_id WHERE f.run_id = ? AND f.kind = 'anomaly'"
        " ORDER BY f.score DESC, f.id LIMIT ?", (run["id"], HEAT_CELLS)).fetchall()
    s.para(f"{total:,} (model, item) cells are flagged as anomaly candidates (threshold "
           f"{run['config'].get('threshold', '?')}); triage them with `benchloupe flags {shell_word(ctx.benchmark)} --kind "
           "anomaly` or on the Anomalies screen.")
    if not rows:
        return
    cells = []
    for name, key, score, payload, state in rows:
        p = json.loads(payload or "{}")
        cells.append((name, key, float(score), float(p.get("residual", score)), p.get("observed"),
                      p.get("expected_p"), state))
    model_rank = list(dict.fromkeys(c[0] for c in cells))[:HEAT_ROWS]
    item_rank = list(dict.fromkeys(c[1] for c in cells if c[0] in model_rank))[:HEAT_COLS]
    mi, ii = {m: k for k, m in enumerate(model_rank)}, {k: j for j, k in enumerate(item_rank)}
    grid = np.full((len(model_rank), len(item_rank)), np.nan)
    drawn = []
    for c in cells:
        if c[0] in mi and c[1] in ii:
            grid[mi[c[0]], ii[c[1]]] = c[3]
            drawn.append(c)
    s.figure(figure(
        "anomalies-heatmap", "Top flagged cells",
        f"The {len(drawn)} strongest of the {total:,} flagged cells, among the {len(model_rank)} models and "
        f"{len(item_rank)} items they fall on (strongest first): the colour is the standardised residual, red "
        "where a model got right what the fit says it should fail (a leak or contamination candidate), blue "
        "the reverse; blank cells are not among the top. A row of red is one model knowing many items; a "
        "column, one item everybody strangely gets.",
        f"Heat map of {len(drawn)} flagged cells over {len(model_rank)} models and {len(item_rank)} items.",
        plots.heatmap(grid, model_rank, item_rank),
        Table(["model", "item", "score", "residual", "observed", "expected_p", "state"], drawn)))


def _forest(ctx: Context, s: Section, con: dict) -> None:
    w = runs.load_artifact(ctx.conn, con["id"], "windows")
    if w is None or w.empty:
        s.para("The contamination run stored no windows.")
        return
    w = w.assign(_p=_col(w, "p_holm", 1.0), _a=-np.abs(_col(w, "shift")))
    top = w.sort_values(["_p", "_a"], kind="stable").head(FOREST_ROWS)
    flagged = top["flagged"].fillna(False).to_numpy(bool) if "flagged" in top else np.zeros(len(top), bool)
    fig = plots.forest(list(top["model"].astype(str)), _col(top, "shift"), _col(top, "ci_low"),
                       _col(top, "ci_high"), flagged)
    n_flag = int(w["flagged"].fillna(False).astype(bool).sum()) if "flagged" in w else 0
    cols = [c for c in w.columns if not c.startswith("_")]
    s.figure(figure(
        "anomalies-contamination", "Contamination windows",
        f"For each model with a training cutoff: the shift of its mean residual on items released after the cutoff "
        f"against those before, with a 95% interval. A model that saw the test items before its cutoff does "
        f"better than the fit expects on them: a shift left of 0 with an interval clear of 0 (red: flagged "
        f"after Holm's correction; {n_flag} of {len(w)}). The {len(top)} models with the smallest corrected p "
        "are drawn; the CSV has every window.",
        f"Forest plot of {len(top)} contamination windows, {n_flag} flagged.", fig,
        Table(cols, [tuple(r) for r in w[cols].itertuples(index=False)], source=export_command(ctx, con, "windows"))))


# ------------------------------------------------------------------------------------------------------ near-tie
def neartie(ctx: Context) -> Section:
    s = Section("neartie", "Near-tie audit")
    run = ctx.read(s, "neartie", "Near-tie audit")
    if run is None:
        return s
    m = run["metrics"]
    t1 = m.get("table1") or m
    status = str(t1.get("status", m.get("status", "")))
    words = STATUS_WORDS.get(status)
    s.para(f"Status: {status.replace('_', ' ')}" + (f": {words}." if words else "."))
    s.table(["benchmark", "K", "τ_b", "near-tie pairs", "reversed", "low-DIF rate %", "random median %",
             "excess pp", "p (random)"],
            [(ctx.benchmark, f"{t1.get('k_discovery', '?')}/{t1.get('k_validation', '?')}", fmt(t1.get("tau_b")),
              fmt(t1.get("eligible_pairs")), fmt(t1.get("reversals")), fmt(_pct(t1.get("rate")), 1),
              fmt(_pct(t1.get("random_median")), 1), fmt(t1.get("excess_pp"), 1), fmt(t1.get("p")))],
            note="Table 1 (paper 002): primary near-tie ranking result")
    pairs = runs.load_artifact(ctx.conn, run["id"], "pairs")
    if pairs is not None and len(pairs):
        dx = _col(pairs, "full_a") - _col(pairs, "full_b")
        dy = _col(pairs, "anchor_a") - _col(pairs, "anchor_b")
        rev = pairs["reversed"].fillna(False).to_numpy(bool)
        drawn = _sample(rev, SCATTER_POINTS)
        cut = (f" A seeded random {len(drawn):,} of them are drawn (reversed ones in their share); the numbers have "
               "every pair." if len(drawn) < len(pairs) else "")
        s.figure(figure(
            "neartie-pairs", "Near-tie pairs: full against low-DIF score differences",
            f"Each of the {len(pairs):,} eligible near-tie pairs (different owner and family, scores within the gap "
            "on the full benchmark): its score difference on the full benchmark (x) against the difference on "
            "the low-DIF recomposition (y). A red cross crossed zero: the pair's order reversed." + cut,
            f"Scatter of {len(pairs):,} near-tie pairs, {int(rev.sum()):,} reversed.",
            plots.scatter_pairs(dx[drawn], dy[drawn], rev[drawn]),
            Table(list(pairs.columns), [tuple(r) for r in pairs.itertuples(index=False)],
                  source=export_command(ctx, run, "pairs"))))
        rp = pairs[rev]
        if len(rp):
            rp = rp.assign(_robust=np.abs(dy[rev])).sort_values("_robust", ascending=False, kind="stable")
            shown = rp.head(TOP_ROWS)
            s.table(["fold", "model A", "model B", "full A−B", "low-DIF A−B"],
                    [(str(r["fold"]), r["model_a"], r["model_b"], fmt(r["full_a"] - r["full_b"], 4),
                      fmt(r["anchor_a"] - r["anchor_b"], 4)) for _, r in shown.iterrows()],
                    note=f"reversed pairs, the most robust reversal (largest low-DIF difference) first: "
                         f"{len(shown)} of {len(rp)}" + ("" if len(shown) == len(rp) else
                                                          "; the CSV of the figure above lists all"))
    ctrl = runs.load_artifact(ctx.conn, run["id"], "controls")
    if ctrl is not None and len(ctrl):
        rate = _col(ctrl, "reversal_rate")
        observed = float(t1.get("rate", np.nan))
        fig, counts, edges = plots.histogram(rate[np.isfinite(rate)], xlabel="reversal rate of a random "
                                             "recomposition", bins=20,
                                             marks={"observed (low-DIF)": (observed, plots.RED)})
        s.figure(figure(
            "neartie-controls", "Matched-random control",
            f"The reversal rate of {len(rate):,} random recompositions matched to the low-DIF one's blueprint "
            f"(histogram) against the observed low-DIF rate (red line, {observed:.3f}). The one-sided p is the "
            "share of controls at or above the observed rate: an observed rate in the right tail means family "
            "DIF, not chance, reorders close models.",
            f"Histogram of {len(rate):,} control reversal rates with the observed rate {observed:.3f}.", fig,
            Table(list(ctrl.columns), [tuple(r) for r in ctrl.itertuples(index=False)],
                  source=export_command(ctx, run, "controls"))))
    return s


def _sample(flag: np.ndarray, n: int) -> np.ndarray:
    """At most *n* indices, in order, the flagged ones in their share (seeded: the same report twice is the same)."""
    if len(flag) <= n:
        return np.arange(len(flag))
    rng = np.random.default_rng(0)
    on, off = np.flatnonzero(flag), np.flatnonzero(~flag)
    k = max(1, round(n * len(on) / len(flag))) if len(on) else 0
    return np.sort(np.concatenate([rng.choice(on, min(k, len(on)), replace=False),
                                   rng.choice(off, min(n - k, len(off)), replace=False)]))


def export_command(ctx: Context, run: dict, name: str) -> str:
    """The command that writes a stored table of *run* as CSV."""
    return f"benchloupe export run-artifact {shell_word(ctx.benchmark)} --run {run['id']} --name {name}"


def _pct(v):
    return None if v is None else 100 * float(v)


# ------------------------------------------------------------------------------------------------------ coverage
def coverage(ctx: Context) -> Section:
    s = Section("coverage", "Coverage")
    run = ctx.read(s, "coverage", "Difficulty coverage")
    if run is not None:
        _coverage(ctx, s, run)
    _benchfill(ctx, s)
    return s


def _coverage(ctx: Context, s: Section, run: dict) -> None:
    m = run["metrics"]
    s.para(f"DDM (distance from a uniform difficulty profile) {fmt(m.get('ddm'))} ± {fmt(m.get('ddm_sd'))}; "
           f"the smallest DDM this many items can reach is {fmt(m.get('ddm_floor'))}.")
    e = runs.load_artifact(ctx.conn, run["id"], "ecdf")
    gaps = runs.load_artifact(ctx.conn, run["id"], "gaps")
    k = int(run["config"].get("k", 5) or 5)
    top = gaps.head(k) if gaps is not None else None
    spans = [] if top is None else [(float(r["lo"]), float(r["hi"]), str(r.get("status", ""))) for _, r in
                                    top.iterrows()]
    if e is not None and len(e):
        z, ec, tg = _col(e, "z"), _col(e, "ecdf"), _col(e, "target_cdf")
        step = max(1, len(z) // 2000)  # 14,000 steps drawn as at most ~2,000 (the CSV keeps every one)
        s.figure(figure(
            "coverage-ecdf", "Difficulty ECDF against the target",
            f"The share of items at or below each difficulty (blue steps, on the 0-1 coverage scale) against the "
            f"uniform target (dashed). Where the steps run flat, no item sits: the top {len(spans)} gaps are "
            "shaded (red where confirmed beyond their uncertainty). DDM is the largest vertical distance "
            "between the two.",
            f"ECDF of {len(z):,} item difficulties against a uniform target, with {len(spans)} gaps shaded.",
            plots.ecdf(z[::step], ec[::step], tg[::step], spans),
            Table(list(e.columns), [tuple(r) for r in e.itertuples(index=False)],
                  source=export_command(ctx, run, "ecdf"))))
    if top is not None and len(top):
        names = [f"#{n + 1} {r['lo']:.3f}-{r['hi']:.3f}" for n, (_, r) in enumerate(top.iterrows())]
        conf = top["confirmed"].fillna(False).to_numpy(bool) if "confirmed" in top else np.zeros(len(top), bool)
        s.figure(figure(
            "coverage-gaps", "The largest gaps and their intervals",
            "Each of the largest gaps between neighbouring item difficulties: its width (point) and 95% interval "
            "from the difficulty uncertainty draws. A gap is confirmed (red) when its interval stays clear of the "
            "widths a uniform benchmark of this size shows; grey ones may close under re-estimation. These are "
            "BenchFill's targets.",
            f"Interval plot of the {len(top)} largest gaps.",
            plots.gap_intervals(names, _col(top, "width"), _col(top, "ci_lo"), _col(top, "ci_hi"), conf),
            Table(list(top.columns), [tuple(r) for r in top.itertuples(index=False)])))


def _benchfill(ctx: Context, s: Section) -> None:
    rows = ctx.conn.execute(
        "SELECT c.id, c.session_id, c.child_key, i.key, c.difficulty_norm, c.decided_by, c.decided_at, c.text"
        " FROM fill_candidates c JOIN fill_sessions f ON f.id = c.session_id LEFT JOIN items i ON i.id = c.item_id"
        " WHERE f.benchmark_id = ? AND c.review_state = 'accepted' ORDER BY c.decided_at, c.id",
        (ctx.benchmark_id,)).fetchall()
    sessions = ctx.conn.execute("SELECT count(*) FROM fill_sessions WHERE benchmark_id = ?",
                                (ctx.benchmark_id,)).fetchone()[0]
    if not sessions:
        s.para(f"BenchFill: no session yet (`benchloupe fill {shell_word(ctx.benchmark)}` proposes items for a gap).")
        return
    s.para(f"BenchFill: {len(rows)} proposals accepted as items, over {sessions} session(s).")
    if rows:
        s.table(["proposal", "session", "item", "difficulty (0-1)", "accepted by", "at", "text"],
                [(r[0], r[1], r[3] or r[2], fmt(r[4]), r[5] or "–", r[6] or "–", _cut(r[7], 80))
                 for r in rows[:TOP_ROWS]],
                note=f"{min(len(rows), TOP_ROWS)} of {len(rows)} accepted proposals")


# ----------------------------------------------------------------------------------------------------- decisions
def decisions(ctx: Context) -> Section:
    s = Section("decisions", "Decisions")
    flags = ctx.conn.execute(
        "SELECT kind, state, CASE WHEN state = 'open' THEN '' ELSE updated_by END, count(*) FROM flags"
        " WHERE benchmark_id = ? GROUP BY 1, 2, 3 ORDER BY 1, 2, 3", (ctx.benchmark_id,)).fetchall()
    props = ctx.conn.execute(
        "SELECT 'proposal', c.review_state, c.decided_by, count(*) FROM fill_candidates c JOIN fill_sessions f"
        " ON f.id = c.session_id WHERE f.benchmark_id = ? GROUP BY 2, 3 ORDER BY 2, 3",
        (ctx.benchmark_id,)).fetchall()
    rows = [(k, st, who or "–", n) for k, st, who, n in flags + props]
    if not rows:
        s.para("Nothing to triage yet: flags come from the analyses above, proposals from BenchFill.")
        return s
    s.para("Triage states of every flag (anomalies, reversals, gaps, items) and BenchFill proposal on this "
           "benchmark, by who decided them last (open ones have no curator). The audit log keeps every decision: "
           f"`benchloupe flags {shell_word(ctx.benchmark)} --history ID`.")
    s.table(["kind", "state", "curator", "count"], rows)
    return s


# ---------------------------------------------------------------------------------------------------- provenance
def provenance(ctx: Context, curator: str) -> Section:
    s = Section("provenance", "Provenance")
    b = ctx.conn.execute("SELECT name, kind, created_at FROM benchmarks WHERE id = ?", (ctx.benchmark_id,)).fetchone()
    n_models = ctx.conn.execute("SELECT count(*) FROM benchmark_models WHERE benchmark_id = ?",
                                (ctx.benchmark_id,)).fetchone()[0]
    n_items = ctx.conn.execute("SELECT count(*) FROM items WHERE benchmark_id = ?", (ctx.benchmark_id,)).fetchone()[0]
    n_runs = ctx.conn.execute("SELECT count(*) FROM runs WHERE benchmark_id = ?", (ctx.benchmark_id,)).fetchone()[0]
    s.table(["what", "value"], [
        ("database", str(ctx.db_path)), ("benchmark", f"{b[0]} ({b[1]}, created {b[2]})"),
        ("models", fmt(n_models)), ("items (all statuses and kinds)", fmt(n_items)), ("runs stored", fmt(n_runs)),
        ("benchloupe version", __version__), ("report made by", curator),
        ("report made at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))])
    used = sorted(ctx.used.values(), key=lambda r: r["id"])
    s.table(["run", "kind", "started", "finished", "seed", "code", "settings"],
            [(f"#{r['id']}", r["kind"], r.get("created_at") or "–", r.get("finished_at") or "–",
              "–" if r.get("seed") is None else str(r["seed"]), r.get("code_version") or "–",
              all_settings(r.get("config") or {})) for r in used],
            note=f"every run this report used ({len(used)})")
    return s
