"""simulator/fits.fit_backoff: the poll schedule that best explains each request's polls
and ready_wait. Its score is computed per group of requests with the same number of
polls (issue 30: calibration within 2x of replay); the choice must stay the one the
plain definition gives: the schedule with the least mean absolute error over every
sample, the first of equals in the order tried (largest cap first)."""

from __future__ import annotations

import random

import pytest

from dpmstream.simulator.fits import fit_backoff

FIRSTS = (25, 50, 75, 100, 125, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2000, 3000)
FACTORS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0)
CAPS = (60000, 16000, 8000, 4000, 2000, 1000, 500)


def schedule_sums(first, factor, cap, per_call_ms, top):
    """Cumulative wait at each poll, and whether the cap was reached within `top` polls."""
    sums, gap, total, capped = [0.0], float(first), 0.0, False
    for _ in range(top):
        total += gap + per_call_ms
        sums.append(total)
        grown = int(round(gap * factor))
        capped = capped or (grown > cap and len(sums) <= top)
        gap = min(grown, cap)
    return sums, capped


def fit_by_definition(samples, per_call_ms):
    """Every schedule scored on every sample, one by one."""
    top = max(n for n, _ in samples)
    best = None
    for first in FIRSTS:
        for factor in FACTORS:
            for cap in CAPS:
                if cap < first:
                    continue
                sums, capped = schedule_sums(first, factor, cap, per_call_ms, top)
                errors = sorted(abs(sums[n] - w) for n, w in samples)
                score = sum(errors) / len(errors)
                if best is None or score < best[0]:
                    best = (score, first, factor, cap, errors[len(errors) // 2], capped)
    return best[1:]


def polled(rng, count, first, factor, cap, per_call_ms, most_polls, noise_ms):
    out = []
    for _ in range(count):
        n = rng.randint(1, most_polls)
        sums, _ = schedule_sums(first, factor, cap, per_call_ms, n)
        out.append((n, int(sums[n] + rng.gauss(0, noise_ms))))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_grouped_fit_chooses_what_scoring_every_sample_chooses(seed):
    rng = random.Random(seed)
    samples = polled(rng, rng.choice([5, 40, 400, 3000]), rng.choice([25, 125, 400]),
                     rng.choice([1.0, 1.5, 2.0]), rng.choice([500, 4000, 60000]),
                     rng.choice([20.0, 21.5]), rng.choice([3, 10, 40]),
                     rng.choice([1, 50, 500]))
    per_call = rng.choice([20.0, 21.5, 7])
    assert fit_backoff(samples, per_call) == fit_by_definition(samples, per_call)


def test_noiseless_polls_give_back_their_schedule_with_no_error():
    samples = polled(random.Random(1), 500, 125, 2.0, 4000, 22.0, 12, 0)
    first, factor, cap, mae, capped = fit_backoff(samples, 22.0)
    assert (first, factor, cap, capped) == (125, 2.0, 4000, True)
    assert mae == pytest.approx(0, abs=1)


try:
    from dpmstream.parsers._native import fit_backoff as compiled_fit_backoff
except ImportError:  # not built
    compiled_fit_backoff = None


@pytest.mark.skipif(compiled_fit_backoff is None, reason="the compiled extension is not built")
@pytest.mark.parametrize("seed", range(12))
def test_the_compiled_fit_is_the_python_one(seed):
    """native/src/fits.rs's fit_backoff against python_fit_backoff, the reference, to the
    float: polls on random schedules with noise, an int or a float per-call time; a float
    wait goes the Python way."""
    from dpmstream.simulator.fits import python_fit_backoff

    rng = random.Random(100 + seed)
    samples = polled(rng, rng.choice([5, 40, 400, 3000]), rng.choice([25, 125, 400]),
                     rng.choice([1.0, 1.5, 2.0, 3.0]), rng.choice([500, 4000, 60000]),
                     rng.choice([20.0, 21.5]), rng.choice([1, 3, 10, 40]),
                     rng.choice([0, 1, 50, 500]))
    per_call = rng.choice([20.0, 21.5, 7, 22.25])
    assert compiled_fit_backoff(samples, per_call) == python_fit_backoff(samples, per_call)
    assert fit_backoff(samples, per_call) == python_fit_backoff(samples, per_call)
    floats = [(n, w + 0.5) for n, w in samples]
    assert fit_backoff(floats, per_call) == python_fit_backoff(floats, per_call)
    far = samples + [(1, 2 ** 62)]   # past 2^53 (native/src/exact_ints.rs): Python answers
    assert compiled_fit_backoff(far, per_call) is None
    assert fit_backoff(far, per_call) == python_fit_backoff(far, per_call)
