"""A job's time estimate from the work it has completed, stable enough to read.

Textual's own progress-bar estimate divides the distance left by the speed of the bar's *ratio* over the last
minute. A BenchFill session's plan shrinks as children are found invalid (the total of LLM calls drops), so the
ratio jumps forward without a single call completing, and its calls come in bursts (a round's answers in
parallel, then one slow rewrite): the estimate swung between 32 s and 14 min within 20 s (issue 32 point 9).
Here the rate is counted in completed units (calls), averaged over the whole job since its first completed unit,
so a change of plan moves only the distance left, and one burst or pause moves the rate little.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_SECONDS = 5.0  # no estimate before this much time of completed work: a first burst is no rate
MIN_DONE = 3.0


@dataclass
class Pace:
    """Completed units over time; :meth:`left` the seconds the rest should take at the average rate so far."""

    t0: float | None = None
    done0: float = 0.0
    t: float = 0.0
    done: float = 0.0
    total: float = 0.0

    def add(self, now: float, done: float, total: float | None) -> None:
        """A progress report at time *now*. Work counted again from a lower figure (a new stage) starts over."""
        if done < self.done:
            self.t0 = None
        if self.t0 is None:
            self.t0, self.done0 = now, done
        self.t, self.done, self.total = now, done, float(total or 0.0)

    def left(self) -> float | None:
        """Seconds to finish, or None while there is no rate to trust (too little done, no total)."""
        if self.t0 is None or not self.total:
            return None
        span, units = self.t - self.t0, self.done - self.done0
        if span < MIN_SECONDS or units < MIN_DONE:
            return None
        return max(self.total - self.done, 0.0) / (units / span)


def fmt_left(seconds: float | None) -> str:
    """``~40 s left``, ``~14 min left``, ``~2.5 h left`` (rounded to what an estimate can claim); "" for none."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"~{max(5, round(seconds / 5) * 5)} s left"
    if seconds < 3600:
        return f"~{round(seconds / 60)} min left"
    return f"~{seconds / 3600:.1f} h left"
