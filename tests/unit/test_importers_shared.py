"""Every ../shared/data set parses with its documented options (docs/IMPORT-FORMATS.md) into the counts
its PROVENANCE.txt states. The numbers are read from PROVENANCE.txt itself where it states them, so the
test follows the data folder. Skipped when ../shared/data is absent."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from benchloupe.store.importers.arena import parse_arena
from benchloupe.store.importers.base import ImportFormatError
from benchloupe.store.importers.detect import detect_format
from benchloupe.store.importers.itemmeta import parse_item_metadata
from benchloupe.store.importers.long import parse_long
from benchloupe.store.importers.wide import parse_classic_irt, parse_metabench, parse_wide

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
pytestmark = [
    pytest.mark.shared_data,
    pytest.mark.skipif(not DATA.is_dir(), reason=f"real data folder {DATA} is absent"),
]


def _need(*parts: str) -> Path:
    path = DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


def _provenance(folder: str) -> str:
    return _need(folder, "PROVENANCE.txt").read_text(encoding="utf-8")


def _num(pattern: str, text: str, group: int = 1) -> int:
    found = re.search(pattern, text)
    assert found, f"PROVENANCE no longer says {pattern!r}"
    return int(found.group(group).replace(",", ""))


CHEMBENCH_LONG = dict(model_col="respondent", item_col="question_name", correct_col="all_correct")


def test_chembench_matrix():
    prov = _provenance("chembench")
    p = parse_wide(_need("chembench", "matrix_models_all_correct.csv.gz"), benchmark="chembench")
    assert p.correct.shape == (_num(r"(\d+) x (\d+) wide", prov), _num(r"(\d+) x (\d+) wide", prov, 2))
    assert int((p.correct < 0).sum()) == _num(r"([\d,]+) empty cells", prov)
    assert "random_baseline" in p.models["name"].tolist()


def test_chembench_long_equals_matrix_and_humans():
    """The long file holds the 32 model rows of the matrix plus 40 human respondents.

    PROVENANCE says 99,162 rows but the file has 94,222 data rows (`zcat | wc -l` = 94,223 with header):
    99,162 - 94,222 = 4,940 = exactly the human rows, i.e. PROVENANCE counted the human rows twice.
    Humans import as respondents like models unless excluded with ``exclude_models="^human_"``.
    """
    prov = _provenance("chembench")
    path = _need("chembench", "responses_long.csv.gz")
    full = parse_long(path, **CHEMBENCH_LONG)
    humans = [n for n in full.models["name"] if n.startswith("human_")]
    human_rows = int((full.correct[full.models["name"].str.startswith("human_").to_numpy()] >= 0).sum())
    assert len(humans) == _num(r"(\d+) human-expert respondent files", prov)
    assert full.counts()["static_cells"] + human_rows == _num(r"([\d,]+) rows: respondent", prov)
    models_only = parse_long(path, exclude_models="^human_", **CHEMBENCH_LONG)
    matrix = parse_wide(_need("chembench", "matrix_models_all_correct.csv.gz"))
    rows = [models_only.models["name"].tolist().index(n) for n in matrix.models["name"]]
    cols = [models_only.items["key"].tolist().index(k) for k in matrix.items["key"]]
    np.testing.assert_array_equal(models_only.correct[np.ix_(rows, cols)], matrix.correct)


def test_chembench_questions():
    prov = _provenance("chembench")
    q = parse_item_metadata(
        _need("chembench", "questions.csv.gz"),
        benchmark="chembench",
        text_col="input",
        answer_col="target",
        group_col="topic_dir",
    )
    assert len(q.items) == _num(r"([\d,]+) question files", prov)
    assert (q.items["group"] == "preference").sum() == _num(r"preference (\d+)", prov)
    matrix = parse_wide(_need("chembench", "matrix_models_all_correct.csv.gz"))
    without_text = set(matrix.items["key"]) - set(q.items["key"])
    assert len(without_text) == _num(r"(\d+) question_names in the reports have no question file", prov)


@pytest.mark.parametrize("bench", ["arc", "gsm8k", "truthfulqa"])
def test_metabench(bench):
    prov = _provenance("metabench")
    responses = sorted(DATA.joinpath("metabench").glob(f"{bench}-*.responses.csv.gz"))
    if not responses:
        pytest.skip(f"metabench {bench} absent")
    try:
        from benchloupe.engine.families import family_from_architecture as arch_to_family
    except ImportError:
        arch_to_family = None
    leaderboard = _need("metabench", "open-llm-leaderboard.csv.gz")
    assert detect_format(responses[0]) == "metabench"
    p = parse_metabench(responses[0], models_file=leaderboard, arch_to_family=arch_to_family)
    assert p.benchmark == f"metabench-{bench}"
    shape = (_num(rf"{bench} (\d+) x (\d+)", prov), _num(rf"{bench} (\d+) x (\d+)", prov, 2))
    assert p.correct.shape == shape and (p.correct >= 0).all()  # "values 0/1, no missing"
    assert all("arch" in m for m in p.models["metadata"])  # "every model ... is present" in the leaderboard
    if arch_to_family is not None:
        assert p.models["family"].notna().mean() > 0.5
    items = parse_item_metadata(
        str(responses[0]).replace(".responses.", ".items."), key_col="item", text_col="prompt"
    )
    assert set(items.items["key"]) == set(
        p.items["key"]
    )  # "Item ids ... equal the item ids in the items file"
    assert items.items["text"].str.len().min() > 0


def test_alpacaeval_ae2():
    prov = _provenance("alpacaeval")
    p = parse_arena(
        _need("alpacaeval", "annotations_ae2_long.csv.gz"),
        benchmark="alpacaeval2",
        model_col="generator_2",
        item_col="instruction_id",
        reward_col="preference",
        reward_model_col="annotator",
        group_col="dataset",
    )
    m = re.search(r"(\d+) models x (\d+) instructions, ([\d,]+) rows", prov)
    assert (len(p.models), len(p.items), len(p.rewards)) == (int(m[1]), int(m[2]), int(m[3].replace(",", "")))
    assert p.rewards["reward"].between(1, 2).all()  # "continuous in [1,2]"
    assert "NullModel" in p.models["name"].tolist()
    assert (p.items["group"] == "selfinstruct").sum() == _num(r"selfinstruct (\d+)", prov)
    inst = parse_item_metadata(
        _need("alpacaeval", "instructions.csv.gz"),
        benchmark="alpacaeval2",
        key_col="instruction_id",
        text_col="instruction",
        group_col="dataset",
    )
    assert set(inst.items["key"]) == set(p.items["key"])


@pytest.mark.parametrize(
    ("name", "pvalues"),
    [("LSAT6", [0.924, 0.709, 0.553, 0.763, 0.870]), ("LSAT7", [0.828, 0.658, 0.772, 0.606, 0.843])],
)
def test_classic_lsat_patterns_equal_expanded(name, pvalues):
    patterns = parse_classic_irt(_need("classic_irt", f"{name}_patterns.csv"))
    expanded = parse_classic_irt(_need("classic_irt", f"{name}_expanded.csv"))
    assert patterns.benchmark == expanded.benchmark == name
    assert patterns.correct.shape == expanded.correct.shape == (1000, 5)
    np.testing.assert_allclose(patterns.correct.mean(0), pvalues, atol=5e-4)  # PROVENANCE gives 3 decimals
    rows_p, counts_p = np.unique(patterns.correct, axis=0, return_counts=True)
    rows_e, counts_e = np.unique(expanded.correct, axis=0, return_counts=True)
    np.testing.assert_array_equal(rows_p, rows_e)
    np.testing.assert_array_equal(counts_p, counts_e)


def test_classic_sat12_and_asvab():
    sat = parse_classic_irt(_need("classic_irt", "SAT12_scored.csv"))
    assert sat.benchmark == "SAT12" and sat.correct.shape == (600, 32)
    assert sat.models["name"].iloc[0] == "SAT12/person_0001"
    asvab = parse_classic_irt(
        _need("classic_irt", "ASVAB_group_patterns.csv"),
        freq_col="White_Male,White_Female,Black_Male,Black_Female",
    )
    groups = [m["group"] for m in asvab.models["metadata"]]
    assert [groups.count(g) for g in ("White_Male", "White_Female", "Black_Male", "Black_Female")] == [
        263,
        228,
        140,
        145,
    ]


@pytest.mark.parametrize("name", ["Science.csv", "Bock1997_patterns.csv", "SAT12_raw.csv"])
def test_classic_polytomous_sets_are_refused(name):
    with pytest.raises(ImportFormatError, match="non-binary"):
        parse_classic_irt(_need("classic_irt", name))
