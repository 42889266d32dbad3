"""The item panel's curve says what is missing (issue 32 point 9: an accepted BenchFill item's panel said "no
fitted abilities yet" above 40 listed abilities). The class: abilities fitted or not, answers or none, a fitted
difficulty or none; "no fitted abilities" only when there are none."""

from __future__ import annotations

import numpy as np
import pytest

from benchloupe.tui.widgets.plots import icc_plot

THETA = np.linspace(-2, 2, 40)


@pytest.mark.parametrize("abilities", [True, False])
@pytest.mark.parametrize("answers", [True, False])
@pytest.mark.parametrize("difficulty", [0.3, None])
def test_the_curve_says_what_is_missing(abilities, answers, difficulty):
    theta = THETA if abilities else np.full(40, np.nan)
    outcome = (THETA > 0).astype(int) if answers else np.full(40, -1)
    text = icc_plot(theta, outcome, difficulty=difficulty, sharpness=1.2 if difficulty is not None else None).plain
    assert ("no fitted abilities" in text) == (not abilities), text
    if abilities and not answers:
        assert "40 models" in text and "answered this item" in text, text
    if abilities and (answers or difficulty is not None):
        assert "┤" in text and "θ" in text, text  # the plot is drawn
    if abilities and not answers and difficulty is not None:
        assert "•" in text and "●" not in text and "○" not in text, text  # the fitted curve, no answers


def test_a_marked_model_that_did_not_answer_is_not_said_to_lack_an_ability():
    outcome = (THETA > 0).astype(int)
    outcome[5] = -1
    text = icc_plot(THETA, outcome, difficulty=0.0, sharpness=1.0, mark=5, mark_label="m5").plain
    assert "m5 has not answered this item" in text and "no ability" not in text, text
