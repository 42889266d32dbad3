"""Seeded simulations with known ground truth: the demo workspace and test fixtures.

The demo mirrors what the three papers analyse: model families with owners (near-tie audit, paper 002 C.1),
static 2PL items with groups and a residual family DIF on some items (002 C.4), an arena set whose rewards
follow the same abilities (DualEval §3), injected contamination cells (DualEval §4.3), a difficulty gap
(paper 003 §3) and one adversarial model that games the arena judge (like AlpacaEval's NullModel).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

FAMILIES = {
    "qwen": ["Qwen2.5-{s}B-Instruct", "Qwen2-{s}B-Chat", "qwen1.5-{s}b-sft"],
    "llama": ["Llama-3.1-{s}B-Instruct", "llama-2-{s}b-chat", "Llama-3-{s}B-tuned"],
    "gemma": ["gemma-2-{s}b-it", "gemma-1.1-{s}b-it", "Gemma-{s}B-ft"],
    "mistral": ["Mistral-{s}B-Instruct-v0.3", "Mixtral-{s}x7B-Instruct", "mistral-{s}b-dpo"],
    "phi": ["Phi-3-{s}B-mini", "phi-2-{s}b-orca", "Phi-3.5-{s}B-instruct"],
}
OWNERS = ["acme-ai", "northwind", "lumen-labs", "openforge", "kestrel", "bluefin", "tinkerers", "quanta-co",
          "riverbank", "helix-ml", "sparrow", "polaris"]
SIZES = [1, 2, 3, 7, 8, 9, 13, 14, 27, 70]

CHEM_GROUPS = ["organic", "analytical", "physical", "safety"]
MATH_GROUPS = ["arithmetic", "algebra", "geometry", "word-problems"]
COMPOUNDS = [("water", "H2O", 18.02), ("methane", "CH4", 16.04), ("ethanol", "C2H6O", 46.07),
             ("benzene", "C6H6", 78.11), ("acetone", "C3H6O", 58.08), ("glucose", "C6H12O6", 180.16),
             ("ammonia", "NH3", 17.03), ("acetic acid", "C2H4O2", 60.05), ("toluene", "C7H8", 92.14),
             ("urea", "CH4N2O", 60.06), ("phenol", "C6H6O", 94.11), ("sulfuric acid", "H2SO4", 98.08)]
SAFETY = ["store it under an inert atmosphere", "keep it away from oxidisers", "handle it in a fume hood",
          "wear nitrile gloves", "neutralise spills with sodium bicarbonate", "keep it below 25 °C"]


@dataclass
class SimBenchmark:
    """One simulated benchmark: results plus the truth that produced them."""

    name: str
    kind: str  # "static" or "arena"
    item_keys: list[str]
    item_text: list[str]
    item_answer: list[str]
    item_group: list[str]
    item_chance: list[float | None]
    a: np.ndarray
    b: np.ndarray
    correct: np.ndarray | None = None  # models x items int8 (-1 missing)
    rewards: np.ndarray | None = None  # models x prompts float
    contaminated: list[tuple[int, int]] = field(default_factory=list)
    gap: tuple[float, float] | None = None
    dif: np.ndarray | None = None  # families (sorted) x items residual family effects
    model_rows: list[int] | None = None  # rows of Workspace.model_names in this benchmark (None = all)
    item_dates: list[str] | None = None  # ISO date per item (item metadata ``date``), None: undated


@dataclass
class LateModel:
    """A model that arrives after the demo's clean fit (issue 32): demo-math results only, simulated from the same
    items, with a contamination window: it solves items dated on or before its cutoff far more often than its
    ability predicts (``window_items``: the failures flipped to successes), so ``benchloupe screen`` and
    ``benchloupe contamination`` have something to find."""

    name: str
    family: str
    owner: str
    theta: float
    cutoff: str
    correct: np.ndarray  # one row over demo-math's items, int8 (-1 missing)
    window_items: list[int]


@dataclass
class Workspace:
    model_names: list[str]
    families: list[str]
    owners: list[str]
    theta: np.ndarray
    adversarial: int
    benchmarks: list[SimBenchmark]
    cutoffs: list[str] | None = None  # ISO date per model (model metadata ``cutoff``), None: none
    late: LateModel | None = None


def _models(rng: np.random.Generator, n_models: int, used: set[str] | None = None
            ) -> tuple[list[str], list[str], list[str]]:
    names, fams, owners = [], [], []
    fam_names = list(FAMILIES)
    used = set() if used is None else used
    i = 0
    while len(names) < n_models:
        fam = fam_names[i % len(fam_names)]
        owner = OWNERS[int(rng.integers(len(OWNERS)))]
        pattern = FAMILIES[fam][rng.integers(len(FAMILIES[fam]))]
        name = f"{owner}/{pattern.format(s=SIZES[rng.integers(len(SIZES))])}"
        i += 1
        if name in used:
            continue
        used.add(name)
        names.append(name)
        fams.append(fam)
        owners.append(owner)
    return names, fams, owners


def _chem_item(rng: np.random.Generator, group: str, j: int) -> tuple[str, str]:
    letters = "ABCD"
    name, formula, mass = COMPOUNDS[rng.integers(len(COMPOUNDS))]
    if group == "safety":
        right = SAFETY[rng.integers(len(SAFETY))]
        wrong = [s for s in SAFETY if s != right]
        rng.shuffle(wrong)
        stem = f"Q{j}. A bottle of {name} ({formula}) arrives in the lab. Which precaution matters most?"
        options = [right, *wrong[:3]]
    elif group == "analytical":
        right = f"{mass:.2f} g/mol"
        options = [right, f"{mass * 1.5:.2f} g/mol", f"{mass / 2:.2f} g/mol", f"{mass + 14:.2f} g/mol"]
        stem = f"Q{j}. What is the molar mass of {name} ({formula})?"
    elif group == "physical":
        t = int(rng.integers(250, 400))
        right = f"{0.0821 * t:.1f} L·atm/mol"
        options = [right, f"{0.0821 * t * 2:.1f} L·atm/mol", f"{8.314 * t:.1f} L·atm/mol", f"{t / 0.0821:.1f} L·atm/mol"]
        stem = f"Q{j}. For one mole of an ideal gas at {t} K, what is the product PV?"
    else:
        right = f"the {formula} functional group"
        options = [right, "an ester", "an amide", "a nitrile"]
        stem = f"Q{j}. Which group characterises {name}?"
    order = rng.permutation(4)
    shown = [options[k] for k in order]
    answer = letters[int(np.where(order == 0)[0][0])]
    text = stem + "\n" + "\n".join(f"{letters[k]}) {shown[k]}" for k in range(4))
    return text, answer


def _math_item(rng: np.random.Generator, group: str, j: int, level: float) -> tuple[str, str]:
    digits = 1 + int(level * 3.99)
    lo, hi = 10 ** (digits - 1), 10**digits
    x, y, z = (int(v) for v in rng.integers(lo, hi, size=3))
    if group == "arithmetic":
        return f"P{j}. Compute {x} + {y} × {z}.", str(x + y * z)
    if group == "algebra":
        return f"P{j}. Solve for n: {y}n + {x} = {y * z + x}.", str(z)
    if group == "geometry":
        return f"P{j}. A rectangle is {x} by {y}. What is its perimeter?", str(2 * (x + y))
    return (f"P{j}. A shop sells {x} pens a day for {z} days and then {y} more. How many pens in total?",
            str(x * z + y))


def _static(rng, name: str, theta: np.ndarray, fams: list[str], n_items: int, groups: list[str], *,
            chance: float | None, gap: tuple[float, float] | None, dif_sd: float, maker) -> SimBenchmark:
    b = rng.normal(0.0, 1.2, n_items)
    if gap is not None:  # push items out of the gap to make a visible hole in the difficulty profile
        inside = (b > gap[0]) & (b < gap[1])
        b[inside] = np.where(rng.random(inside.sum()) < 0.5, gap[0] - rng.random(inside.sum()),
                             gap[1] + rng.random(inside.sum()))
    a = np.exp(rng.normal(0.1, 0.3, n_items))
    fam_idx = {f: k for k, f in enumerate(sorted(set(fams)))}
    dif = np.zeros((len(fam_idx), n_items))
    dif_items = rng.random(n_items) < 0.3
    dif[:, dif_items] = rng.normal(0, dif_sd, (len(fam_idx), dif_items.sum()))
    dif -= dif.mean(axis=0, keepdims=True)
    f_of = np.array([fam_idx[f] for f in fams])
    logit = a[None, :] * (theta[:, None] - b[None, :]) + dif[f_of]
    p = 1.0 / (1.0 + np.exp(-logit))
    if chance:
        p = chance + (1 - chance) * p
    y = (rng.random(p.shape) < p).astype(np.int8)
    missing = rng.random(y.shape) < 0.02
    y[missing] = -1
    grp = [groups[j % len(groups)] for j in range(n_items)]
    ranks = np.argsort(np.argsort(b)) / max(n_items - 1, 1)
    texts, answers = [], []
    for j in range(n_items):
        t, ans = maker(rng, grp[j], j + 1, ranks[j])
        texts.append(t)
        answers.append(ans)
    keys = [f"{name.split('-')[-1]}-{j + 1:04d}" for j in range(n_items)]
    return SimBenchmark(name, "static", keys, texts, answers, grp, [chance] * n_items, a, b, correct=y, gap=gap,
                        dif=dif)


def demo_workspace(seed: int = 20261129, n_models: int = 40, audit_models: int = 90) -> Workspace:
    """The demo workspace: 40 models in 5 families in every benchmark, two static benchmarks, one arena set.

    demo-chem also holds ``audit_models`` more models (drawn from their own stream ``seed + 1``, so the rest
    of the demo is the same with or without them): with 26 models per family, every family keeps the near-tie
    audit's minimum of 20 after the owner cap, so ``benchloupe audit neartie demo-chem`` runs with the
    paper's settings (paper 002 C.1).
    """
    rng = np.random.default_rng(seed)
    names, fams, owners = _models(rng, n_models - 1)
    names.append("gaming-lab/NullModel-constant")
    fams.append("unknown")
    owners.append("gaming-lab")
    adversarial = len(names) - 1
    fam_shift = {"qwen": 0.3, "llama": 0.1, "gemma": -0.1, "mistral": 0.0, "phi": -0.3, "unknown": -1.5}
    theta = rng.normal(0, 0.9, len(names)) + np.array([fam_shift[f] for f in fams])
    theta[adversarial] = -1.8
    theta -= theta.mean()

    chem = _static(rng, "demo-chem", theta, fams, 320, CHEM_GROUPS, chance=0.25, gap=(-2.2, -0.4), dif_sd=0.7,
                   maker=lambda r, g, j, lvl: _chem_item(r, g, j))
    math = _static(rng, "demo-math", theta, fams, 240, MATH_GROUPS, chance=None, gap=(0.0, 2.0), dif_sd=0.5,
                   maker=_math_item)
    # Contamination (DualEval §4.3): weak models "solve" hard short-answer items they should fail.
    weak = np.argsort(theta)[1:9]
    hard = np.argsort(-math.b)[:40]
    for k in range(10):
        m, j = int(weak[k % len(weak)]), int(hard[(k * 7) % len(hard)])
        math.correct[m, j] = 1
        math.contaminated.append((m, j))

    n_prompts = 120
    pb = rng.normal(0, 1.0, n_prompts)
    pa = np.exp(rng.normal(0, 0.25, n_prompts))
    rewards = pa[None, :] * (theta[:, None] - pb[None, :]) * 0.8 + rng.normal(0, 0.6, (len(names), n_prompts))
    rewards[adversarial] = rng.normal(2.5, 0.2, n_prompts)  # the judge is fooled by a constant persuasive reply
    arena_text = [f"Prompt {j + 1}: {t}" for j, t in enumerate(_arena_prompts(rng, n_prompts))]
    arena = SimBenchmark("demo-arena", "arena", [f"arena-{j + 1:04d}" for j in range(n_prompts)], arena_text,
                         [""] * n_prompts, [["advice", "coding", "writing", "explain"][j % 4] for j in range(n_prompts)],
                         [None] * n_prompts, pa, pb, rewards=rewards)
    base = list(range(len(names)))
    math.model_rows, arena.model_rows = base, base
    if audit_models:
        theta = np.concatenate([theta, _add_audit_models(np.random.default_rng(seed + 1), chem, names, fams, owners,
                                                         audit_models)])
    ws = Workspace(names, fams, owners, theta, adversarial, [chem, math, arena])
    _add_dates_and_late_model(np.random.default_rng(seed + 2), ws, math)
    return ws


DEMO_START = np.datetime64("2023-01-01")
LATE_CUTOFF_DAYS = 730  # the late model's cutoff: 2025-01-01, about two thirds of demo-math's items before it
LATE_WINDOW_RATE = 0.6  # share of its failures on pre-cutoff items flipped to successes (the window)


def _add_dates_and_late_model(rng: np.random.Generator, ws: Workspace, math: SimBenchmark) -> None:
    """Item dates (demo-math: uniform over 2023-2025), model cutoffs (uniform over mid 2023 to mid 2025) and the
    late model with its contamination window, from their own random stream (``seed + 2``), so every response of
    the first 130 models is the same as without them."""
    n_items = len(math.item_keys)
    math.item_dates = [str(DEMO_START + int(d)) for d in rng.integers(0, 3 * 365, n_items)]
    ws.cutoffs = [str(DEMO_START + int(d)) for d in rng.integers(180, 900, len(ws.model_names))]
    fam_idx = {f: k for k, f in enumerate(sorted(set(ws.families)))}
    theta = float(rng.normal(0.0, 0.5))
    logit = math.a * (theta - math.b) + math.dif[fam_idx["mistral"]]
    y = (rng.random(n_items) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int8)
    day = (np.array(math.item_dates, dtype="datetime64[D]") - DEMO_START).astype(int)
    flip = np.flatnonzero((day <= LATE_CUTOFF_DAYS) & (y == 0) & (rng.random(n_items) < LATE_WINDOW_RATE))
    y[flip] = 1
    y[rng.random(n_items) < 0.02] = -1
    ws.late = LateModel("latecomer/Mistral-12B-Instruct-v0.3", "mistral", "latecomer", theta,
                        str(DEMO_START + LATE_CUTOFF_DAYS), y, [int(j) for j in flip if y[j] == 1])


def _add_audit_models(rng, chem: SimBenchmark, names, fams, owners, n_extra: int) -> np.ndarray:
    """Extra demo-chem models (appended in place to the lists); returns their abilities.

    Same item parameters and family DIF as the first 40, abilities from the same law.
    """
    more, more_fams, more_owners = _models(rng, n_extra, used=set(names))
    fam_shift = {"qwen": 0.3, "llama": 0.1, "gemma": -0.1, "mistral": 0.0, "phi": -0.3}
    more_theta = rng.normal(0, 0.9, n_extra) + np.array([fam_shift[f] for f in more_fams])
    fam_idx = {f: k for k, f in enumerate(sorted(set(fams)))}
    logit = chem.a[None, :] * (more_theta[:, None] - chem.b[None, :]) + chem.dif[[fam_idx[f] for f in more_fams]]
    p = 1.0 / (1.0 + np.exp(-logit))
    chance = chem.item_chance[0]
    if chance:
        p = chance + (1 - chance) * p
    y = (rng.random(p.shape) < p).astype(np.int8)
    y[rng.random(y.shape) < 0.02] = -1
    names += more
    fams += more_fams
    owners += more_owners
    chem.correct = np.vstack([chem.correct, y])
    chem.model_rows = list(range(len(names)))
    return more_theta


def _arena_prompts(rng: np.random.Generator, n: int) -> list[str]:
    topics = ["a sourdough starter", "a Python decorator", "the French Revolution", "a job interview",
              "a cover letter", "binary search", "photosynthesis", "a haiku about autumn", "tax brackets",
              "a wedding toast", "SQL joins", "jet lag"]
    verbs = ["Explain", "Write", "Give advice on", "Summarise", "Critique", "Plan"]
    return [f"{verbs[rng.integers(len(verbs))]} {topics[rng.integers(len(topics))]} for a curious reader." for _ in range(n)]
