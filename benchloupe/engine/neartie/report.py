"""The near-tie audit report: one Markdown section per table of paper 002, same rows and columns, so a reader
can hold it beside the paper (one benchmark per run, so one row where the paper has five).

Text from data (benchmark, model, owner, family and item-group names, a variant's note) goes through
:func:`benchloupe.textsafe.markdown`: a name holding ``|``, ``*``, a backtick or ``<script>`` is shown as itself and
neither breaks a table nor injects markup."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from benchloupe.columns import Columns
from benchloupe.hints import Opt, say
from benchloupe.textsafe import markdown as md

if TYPE_CHECKING:
    import pandas as pd

SENSITIVITY = "*Sensitivity analysis: its p-values are descriptive, not confirmatory (paper 002 D.1).*"


def _f(x, fmt: str = ".3f") -> str:
    if x is None or (isinstance(x, float | np.floating) and not np.isfinite(x)):
        return "n/a"
    return format(x, fmt)


def _pct(x) -> str:
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{100 * x:.1f}"


def md_table(table: pd.DataFrame | Columns) -> str:
    """A plain Markdown table (no optional ``tabulate`` dependency); floats to 4 significant digits, text escaped."""
    def cell(value) -> str:
        if isinstance(value, float | np.floating):
            return "n/a" if np.isnan(value) else f"{value:.4g}"
        return "n/a" if value is None else md(value)

    head = "| " + " | ".join(map(md, table.columns)) + " |"
    rule = "|" + "---|" * len(table.columns)
    values = table.rows() if isinstance(table, Columns) else table.itertuples(index=False)
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in values]
    return "\n".join([head, rule, *rows])


def star(excess: float | None, p: float | None, alpha: float = 0.05) -> str:
    """Excess in pp with a star where p <= alpha (Table 9's cells), "n/a" where the variant did not run."""
    if excess is None or (isinstance(excess, float) and np.isnan(excess)):
        return "n/a"
    return f"{excess:+.1f}" + ("*" if p is not None and p <= alpha else "")


def split_lines(res) -> list[str]:
    """The owner split's knife edges (issue 22): how many decisions were drawn or within 1e-12 of a tie."""
    s = res.summary
    if "split_decisions" not in s:
        return []
    lines = ["## Owner split: knife-edge decisions", "",
             f"{s['split_decisions']} owner decisions; {s['split_ties']} exact cost ties (drawn, as the reference "
             f"draws); {s['split_knife_edges']} knife edges (costs differ by less than 1e-12, relatively: a last-bit "
             "change in one accuracy could move that owner, and every later owner with it).", ""]
    edges = res.tables.get("split_edges")
    if edges is not None and len(edges):
        shown = edges.take(np.arange(min(len(edges), 20)))
        lines += [md_table(shown.assign(relative_difference=[f"{v:.2g}" for v in shown["relative_difference"]])),
                  ""]
        if len(edges) > 20:
            lines += [f"({len(edges) - 20} more in the run's split_edges artifact.)", ""]
    return lines


def verdict_line(summary: dict) -> str:
    """The split-stability verdict in one line (report, CLI, run details, Reversals screen): the verdict, then
    the spread of p over the splits."""
    text = summary["verdict"]
    if summary.get("p_min") is not None:
        text += (f"; p {summary['p_min']:.3f}-{summary['p_max']:.3f} (median {summary['p_median']:.3f}), "
                 f"{100 * summary['share_significant']:.0f}% of splits at or below {summary['significance']:g}")
    return text


def stability_lines(res) -> list[str]:
    """The split-stability section: the verdict and Table 1 under each other owner split (issue 22)."""
    summary = res.summary.get("split_stability")
    table = res.tables.get("split_seeds")
    if not summary or table is None:
        return []
    line = verdict_line(summary)
    rows = [[str(r["split"]), str(r["family_seed"]),
             f"{r['k_discovery']}/{r['k_validation']}" if r.get("k_discovery") is not None else "",
             _n(r.get("eligible_pairs")), _n(r.get("reversals")), _pct(r.get("rate")), _pct(r.get("random_median")),
             _f(r.get("excess_pp"), "+.1f"), _f(r.get("p")), str(r["status"]), "yes" if r["agrees"] else "no",
             md(r.get("note") or "")] for r in table.records()]
    return ["## Split stability (beyond the paper)", "",
            f"**{line}.** The primary audit again under {summary['splits']} other owner splits (population seed "
            f"family_seed + 1 .. + {summary['splits']}: owner-cap draws, owner order and tie draws), each with its own "
            f"K, anchors and controls; a split agrees when it reaches the primary status "
            f"({summary['primary_status']}, p {_f(summary['primary_p'])}). Stable: at least 90% agree.", "",
            *_rows(["Split", "Seed", "K", "Pairs", "Reversals", "Low-DIF", "Random", "Excess", "p", "Status",
                    "Agrees", "Note"], rows), ""]


def _n(x) -> str:
    return "" if x is None or (isinstance(x, float | np.floating) and np.isnan(x)) else str(int(x))


def _rows(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def status_words(s: dict, cfg) -> str:
    """The audit's status in words: what it found and, as much, what it does not show (paper 002 Section 5,
    C.6; reference B.6's status rules)."""
    status, n = s["status"], s.get("eligible_pairs") or 0
    pairs = f"{n} near-tie pair{'s' if n != 1 else ''}"
    against = (f"the low-DIF anchor reverses {_pct(s.get('rate'))}% of the {pairs}, blueprint-matched random "
               f"anchors of the same size a median {_pct(s.get('random_median'))}% (excess "
               f"{_f(s.get('excess_pp'), '+.1f')} pp, one-sided p {_f(s.get('p'))})")
    if status == "excess_sensitivity_detected":
        return (f"In words: {against}. The near-tie order of different-family models depends on which items carry "
                f"family-specific signal more than a random recomposition of the benchmark would make it (p <= "
                f"{cfg.significance:g}). This is a statement about these near-tied comparisons, not about which model "
                "is better: the reversed pairs below are the ones to look at.")
    if status == "no_significant_excess_detected":
        sign = ("positive but within what random anchors give" if (s.get("excess_pp") or 0) > 0
                else "not positive")
        return (f"In words: {against}; the excess is {sign} (p > {cfg.significance:g}). A non-significant excess is "
                "not evidence of equivalence: it does not show that the ranking is free of family-related "
                f"sensitivity, only that this test, on {pairs}, did not detect more of it than random "
                "recompositions of the same blueprint produce (paper 002 reads its null benchmark as \"no evidence "
                "of excess\", and a nonsignificant control as not establishing that the effect disappears).")
    if status == "insufficient_eligible_pairs":
        return say("In words: no pair of scored representatives from different owners and different families lies "
                   f"within {100 * cfg.gap:g} pp on the full score without a tie, so there is nothing to test; the "
                   "audit draws no conclusion either way (neither an excess nor its absence). More models per family, "
                   "or wider near-tie bands as a sensitivity run (", Opt("gap_curve"), "), give pairs to count.")
    if status == "undefined_random_controls":
        return ("In words: at least one of the random control anchors leaves every near-tie pair tied, so its "
                "reversal rate, and with it the randomization p-value, is undefined; the audit withholds inference, "
                "as the reference does. The observed counts above are still exact.")
    return f"In words: status {status} (not one the paper defines)."


def table5_note(t, folds) -> list[str]:
    """What a degenerate Table 5 means: in blueprint cells where every stratum holding anchors is all anchors
    (one-item cells, cells of up to 4 items) the matched control cannot differ from the low-DIF subtest, so
    ratios of 1.000 there say "the same items", not "balance achieved"."""
    if folds is None or "fixed_cells" not in folds.columns:
        return []
    rows = list(folds.itertuples(index=False))
    per_fold = "; ".join(
        f"{r.audit_half} audit half: {int(r.fixed_cells)} of {int(r.cells)} cells ({int(r.single_item_cells)} "
        f"holding a single item), {int(r.fixed_anchors)} of {int(r.strata_items_matched)} anchors" for r in rows)
    if not sum(int(r.fixed_cells) for r in rows):
        return []
    share = sum(int(r.fixed_anchors) for r in rows) / max(sum(int(r.strata_items_matched) for r in rows), 1)
    ones = all(_f(t[c]) == "1.000" for c in ("g_ratio", "citc_ratio", "sem_ratio"))
    lead = ("Every ratio prints 1.000 because the matched control has no choice for most anchors. " if ones
            and share >= 0.5 else "Every ratio prints 1.000. " if ones else "") + "Cells where the matched control has no choice: "
    return [lead + per_fold + ". In such a cell every stratum holding anchors is all anchors (always so for a cell "
            "of up to 4 items: one item per stratum), so each control draws exactly the low-DIF items there. "
            f"{100 * share:.0f}% of the anchors are in such cells: the ratios and the control's reversal rate "
            "compare the low-DIF subtest with itself to that extent, and a ratio near 1.000 there says \"the same "
            "items\", not that balance was achieved on a free draw.", ""]


def gap_curve_rows(t, bench: str) -> tuple[list[str], list[list[str]], list[str]]:
    """Table 7's header and rows; a gap with no countable pair says "no pairs" in every row (a rate, a p-value or
    a bootstrap range there would be read as a number; the bootstrap's frozen pair set can hold pairs tied on the
    observed scores that it counts in some replicates)."""
    head = ["Benchmark"] + [f"{g:g} pp" for g in t["gap_pp"]]
    n = [int(x) for x in t["pairs"]]
    rows = [[bench] + [f"{_pct(r)}/{_pct(m)}" if k else "no pairs" for r, m, k in
                       zip(t["rate"], t["random_median"], n, strict=True)],
            ["pairs"] + [str(k) for k in n], ["p"] + [_f(p) if k else "no pairs" for p, k in zip(t["p"], n, strict=True)]]
    if "bootstrap_rate_lo" in t:
        rows.append(["bootstrap 95% range"] + [f"[{_pct(lo)}, {_pct(hi)}]" if k else "no pairs" for lo, hi, k in
                                               zip(t["bootstrap_rate_lo"], t["bootstrap_rate_hi"], n, strict=True)])
    empty = [f"{g:g} pp" for g, k in zip(t["gap_pp"], n, strict=True) if not k]
    notes = [f"No near-tie pair at {', '.join(empty)}: no different-owner, different-family pair of representatives "
             "is that close on the full score without a tie on either score, so there is no rate, p-value or range "
             "to report there."] if empty else []
    return head, rows, notes


def table11_note(rate, t) -> list[str]:
    """How to read Table 11, and why the observed rate can lie outside its own bootstrap range (paper 002 C.7)."""
    lines = ["The ranges are 2.5-97.5% percentiles of recomposed statistics, not confidence intervals around the "
             "observed rate nor intervals for the excess (paper 002, Table 11's caption)."]
    lo, hi = t["rate_lo"], t["rate_hi"]
    if rate is not None and lo is not None and hi is not None and np.isfinite(rate) and not lo <= rate <= hi:
        side = "above" if rate > hi else "below"
        lines.append(f"The observed {_pct(rate)}% lies {side} the range {_pct(lo)}-{_pct(hi)}%, as in the paper (BBH: "
                     "42.1% observed, 18.9-39.2%): each replicate reweights whole item groups or blocks, which moves "
                     "every model's full and anchor score, while the near-tie pair set stays frozen from the observed "
                     "full scores (C.7). Those pairs were chosen because their observed full scores nearly tie; a "
                     "recomposition usually pulls them apart, so fewer of them reverse, and the replicates are not "
                     "centred on the observed rate. It is not an error and not a failed check.")
    return [" ".join(lines), ""]


def markdown_report(res, bench: str) -> str:
    s, cfg = res.summary, res.config
    bench = md(bench)
    lines = ["# Family-DIF near-tie audit", "", f"Status: **{s['status']}**", "", status_words(s, cfg), "",
             f"Items: {s['items']}; capped models: {s['capped_models']}; owners: {s['owners']}; "
             f"families: {s['families']}; scored representatives: {s['representatives']}.",
             f"Near tie: different owner, different family, |full gap| <= {100 * cfg.gap:g} pp "
             f"(tolerance {cfg.gap_tolerance:g}); anchor ties: {cfg.anchor_ties}; protocol: {cfg.protocol}.", "",
             "## Table 1: primary near-tie ranking results (50% low-DIF anchors)", ""]
    lines += _rows(["Benchmark", "K", "tau_b", "Near-tie pairs", "Low-DIF", "Random", "Excess", "p_rand"],
                   [[bench, f"{s['k_discovery']}/{s['k_validation']}", _f(s["tau_b"]), str(s["eligible_pairs"]),
                     _pct(s["rate"]), _pct(s["random_median"]), _f(s["excess_pp"], "+.1f"), _f(s["p"])]])
    lines += ["", f"Reversals {s['reversals']} of {s['eligible_pairs']}; R = {s['controls']} blueprint-matched "
              f"controls ({s['undefined_controls']} undefined).", "", "### Folds", "", md_table(res.tables["folds"]), ""]
    lines += split_lines(res) + stability_lines(res)
    pr = res.protocol
    if "table2_replication" in pr:
        t = pr["table2_replication"].iloc[0]
        lines += ["## Table 2: owner-disjoint stability of residual item-family signatures", ""]
        lines += _rows(["Benchmark", "Median rho", "Top-20% overlap", "Advantaged-family agreement"],
                       [[bench, _f(t["median_rho"]), _pct(t["top20_overlap"]) + "%",
                         _pct(t["advantaged_family_agreement"]) + "%"]])
        lines += ["", f"One-sided within-cell permutation p ({int(t['permutations'])} permutations): rho "
                  f"{_f(t['p_rho'])}, overlap {_f(t['p_overlap'])}, agreement {_f(t['p_agreement'])}; "
                  f"permutation medians: overlap {_pct(t['null_overlap_median'])}%, agreement "
                  f"{_pct(t['null_agreement_median'])}%; {int(t['common_cells'])} common cells.", "",
                  "Per-family rho:", "", md_table(pr["table2_family_rho"]), ""]
        att = pr.get("item_group_attribution")
        if att is not None and len(att):
            lines += [f"Item-group attribution (eqs. 69-70): sign replication "
                      f"{100 * att.attrs.get('sign_replication', np.nan):.0f}% (one-sided binomial p "
                      f"{_f(att.attrs.get('binomial_p'))}).", "", md_table(att), ""]
        else:
            lines += ["Item-group attribution (eqs. 69-70): fewer than 2 item groups with >= 20 items.", ""]
    if "table4_direct_mirt" in pr:
        t = pr["table4_direct_mirt"].iloc[0]
        lines += ["## Table 4: direct penalised joint logistic MIRT (B.1)", ""]
        lines += _rows(["Benchmark", "K", "Low-DIF", "Random", "Excess", "p", "Spectral excess"],
                       [[bench, str(t["k"]), _pct(t["low_dif_rate"]), _pct(t["random_median"]),
                         _f(t["excess_pp"], "+.1f"), _f(t["p"]), _f(t["spectral_excess_pp"], "+.1f")]])
        lines += ["", f"Adam, at most {int(t['max_updates'])} updates, {int(t['inits'])} initialisation(s).", ""]
    if "table5_matched_controls" in pr:
        t = pr["table5_matched_controls"].iloc[0]
        lines += ["## Table 5: discrimination- and reliability-matched diagnostic control (B.2)", ""]
        lines += _rows(["Benchmark", "g_i ratio", "CITC ratio", "SEM ratio", "10^3 abs(Delta alpha)", "Rev. (%)",
                        "Excess (pp)", "p"],
                       [[bench, _f(t["g_ratio"]), _f(t["citc_ratio"]), _f(t["sem_ratio"]),
                         _f(t["abs_delta_alpha_e3"], ".2f"),
                         f"{_pct(t['low_dif_rate'])}/{_pct(t['control_median'])}", _f(t["excess_pp"], "+.1f"),
                         _f(t["p"])]])
        lines += [""] + table5_note(t, pr.get("table5_folds"))
    sec = res.secondary
    if "within-family specificity" in sec:
        t = sec["within-family specificity"].iloc[0]
        lines += ["## Table 6: pair-type specificity diagnostic (B.3)", "", SENSITIVITY, ""]
        lines += _rows(["Benchmark", "Within n", "Within L/R", "Within excess", "p_within", "Delta_spec", "p_spec"],
                       [[bench, _n(t["within_pairs"]), f"{_pct(t['within_rate'])}/{_pct(t['within_random_median'])}",
                         _f(t["within_excess_pp"], "+.1f"), _f(t["p_within"]), _f(t["delta_spec_pp"], "+.1f"),
                         _f(t["p_spec"])]])
        lines += [""]
    if "gap-threshold curve" in sec:
        t = sec["gap-threshold curve"]
        lines += ["## Table 7: low-DIF / matched-random reversal rate (%) by full-score gap", "", SENSITIVITY, ""]
        head, rows, notes = gap_curve_rows(t, bench)
        lines += _rows(head, rows) + [""] + [*notes, *([""] if notes else [])]
    if "anchor-fraction sensitivity" in sec:
        t = sec["anchor-fraction sensitivity"]
        fr = {f"{100 * f:g}%": f"{_f(tau)} / {_pct(r)}%" for f, tau, r in zip(t["fraction"], t["tau_b"], t["rate"],
                                                                                strict=True)}
        fr.setdefault(f"{100 * cfg.anchor_fraction:g}%", f"{_f(s['tau_b'])} / {_pct(s['rate'])}%")
        keys = sorted(fr, key=lambda k: float(k[:-1]))
        lines += ["## Table 8: sensitivity to the retained anchor fraction (tau_b / rate)", "", SENSITIVITY, ""]
        lines += _rows(["Benchmark", *keys], [[bench] + [fr[k] for k in keys]]) + [""]
    if "table9_population_robustness" in pr:
        t = pr["table9_population_robustness"]
        lines += ["## Table 9: excess one-point reversal rate (pp) under nine population perturbations", ""]
        rows = [[md(r.variant), star(r.excess_pp, r.p, cfg.significance), _n(r.pairs), _f(r.p), _n(r.controls),
                 md(r.note) if isinstance(r.note, str) else ""]
                for r in t.itertuples(index=False)]
        lines += _rows(["Variant", bench, "pairs", "p", "controls", "note"], rows)
        ran = t[t["excess_pp"].notna()]
        lines += ["", f"Stars: p <= {cfg.significance:g}. Positive in {int(ran['positive'].sum())} of {len(ran)} "
                  f"specifications, significant in {int(ran['significant'].sum())}. The pass rule (eq. 61) counts "
                  "benchmarks (at least 3 of 5 positive and at least 3 significant per variant); the cross-benchmark "
                  "robustness audit (audit robustness) applies it to the latest full-protocol run of each benchmark.",
                  ""]
    if "table10_family_shifts" in pr:
        t = pr["table10_family_shifts"]
        lines += ["## Table 10: family mean anchor-minus-full shifts (pp) with owner-bootstrap 95% CIs", ""]
        rows = [[md(r.family), str(r.n), _f(r.score_shift_pp, "+.2f"), f"[{_f(r.ci_lo_score, '+.2f')}, "
                 f"{_f(r.ci_hi_score, '+.2f')}]", _f(r.percentile_shift_pp, "+.2f"),
                 f"[{_f(r.ci_lo_percentile, '+.2f')}, {_f(r.ci_hi_percentile, '+.2f')}]"]
                for r in t.itertuples(index=False)]
        lines += _rows(["Family", "n", "Score shift", "[95% CI]", "Percentile shift", "[95% CI]"], rows)
        lines += ["", f"Family score-shift range: {_f(t.attrs.get('score_shift_range_pp'), '.2f')} pp. The paper's "
                  "exact-common-model rows compare two benchmarks on the same models "
                  "(`shifts.exact_common_shifts(left, right)`).", ""]
    if "composition bootstrap" in sec:
        t = sec["composition bootstrap"].iloc[0]
        lines += ["## Table 11: composition-bootstrap sensitivity", "", SENSITIVITY, ""]
        lines += _rows(["Benchmark", "Observed reversal (%)", "Bootstrap range (%)", "Bootstrap tau_b range",
                        "replicates", "units"],
                       [[bench, _pct(s["rate"]), f"{_pct(t['rate_lo'])}-{_pct(t['rate_hi'])}",
                         f"{_f(t['tau_lo'])}-{_f(t['tau_hi'])}", _n(t["replicates"]), _n(t["units"])]]) + [""]
        lines += table11_note(s["rate"], t)
    return "\n".join(lines)


def cross_benchmark_markdown(table: pd.DataFrame, runs: dict[str, int], alpha: float, need: int) -> str:
    """The D.2 pass rule across benchmarks (paper 002 Table 9 and eqs. 59-61) as a Markdown section."""
    benches = list(runs)
    lines = ["# Population robustness across benchmarks (paper 002 D.2, Table 9)", "",
             "Excess one-point reversal rate (pp) of each specification on each benchmark's latest "
             "full-protocol near-tie run: " + ", ".join(f"{md(b)} (run #{r})" for b, r in runs.items()) + ".", ""]
    rows = [[md(r["variant"]), *(str(r[b]) for b in benches), str(r["G_dir"]), str(r["G_sig"]),
             "pass" if r["passes"] else "fail"] for r in table.to_dict("records")]
    lines += _rows(["Variant", *map(md, benches), "G_dir", "G_sig", "rule"], rows)
    passed = int(table["passes"].sum())
    lines += ["", f"Stars: p <= {alpha:g}; n/a: the variant did not run on that benchmark (too few models or not "
              f"applicable). G_dir counts benchmarks with positive excess (eq. 59), G_sig those with p <= {alpha:g} "
              f"(eq. 60); a specification passes when both are >= {need} (eq. 61). {passed} of {len(table)} "
              "specifications pass."]
    if len(benches) != 5 or need != 3:
        lines.append(f"The paper's rule is >= 3 of its 5 benchmarks; here {len(benches)} benchmark"
                     f"{'s' if len(benches) != 1 else ''} with >= {need} required"
                     + (", so no specification can pass." if len(benches) < need else "."))
    return "\n".join(lines) + "\n"
