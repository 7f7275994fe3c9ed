"""TOPSIS decision rule: known answers, ties, degenerate columns, errors, and a property test."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.errors import ConfigError, ConstraintError
from optimizer.search.decision import topsis


def test_paper_variant_picks_least_distance_to_ideal():
    # rows: (latency, energy); vector norms are 5 and 5 -> normalised = F / 5
    F = np.array([[3.0, 4.0], [1.0, 2.0], [4.0, 0.0]])
    # norms: sqrt(26), sqrt(20); ideal = (1, 0)/norms
    # distances: row0 ((2/5.099)^2+(4/4.472)^2)^.5=0.977, row1 (0, 2/4.472)=0.447, row2 (3/5.099,0)=0.588
    ch = topsis(F, variant="paper")
    assert ch.index == 1
    assert ch.score == pytest.approx(2 / np.sqrt(20))
    assert ch.as_dict()["variant"] == "paper" and ch.as_dict()["weights"] == [1.0, 1.0]


def test_weights_change_the_choice():
    F = np.array([[3.0, 4.0], [1.0, 2.0], [4.0, 0.0]])
    # energy weighted 10x: row2 (energy 0) distance 3/5.099 = 0.588, row1 10*2/4.472 = 4.47
    assert topsis(F, weights=[1, 10]).index == 2
    assert topsis(F, weights=[1, 0]).index == 1  # latency only: least latency


def test_classic_variant_closeness():
    F = np.array([[1.0, 10.0], [10.0, 1.0], [5.0, 5.0], [9.0, 9.0]])
    ch = topsis(F, variant="classic")
    # row 2 is balanced: closeness computed by hand
    n0 = np.sqrt(1 + 100 + 25 + 81)
    n1 = n0
    V = F / np.array([n0, n1])
    dp = np.sqrt(((V - V.min(0)) ** 2).sum(1))
    dm = np.sqrt(((V - V.max(0)) ** 2).sum(1))
    C = dm / (dp + dm)
    assert ch.index == int(np.argmax(C)) == 2
    assert ch.score == pytest.approx(C[2])
    assert np.isclose(ch.scores, C).all()


def test_infeasible_rows_are_dropped_before_normalising():
    F = np.array([[0.0, 0.0], [1.0, 2.0], [2.0, 1.0], [1.5, 1.5]])
    ch = topsis(F, feasible=[False, True, True, True])
    assert ch.index == 3  # the infeasible ideal row is never chosen
    assert np.isnan(ch.scores[0])


def test_exact_tie_breaks_lexicographically_then_by_index():
    # rows 0 and 1 are symmetric: same distance to the ideal; row 1 has the smaller latency
    F = np.array([[2.0, 1.0], [1.0, 2.0], [3.0, 3.0]])
    assert topsis(F).index == 1
    assert topsis(F, variant="classic").index == 1
    # identical rows: the lowest index wins
    G = np.array([[2.0, 2.0], [1.0, 1.0], [1.0, 1.0]])
    assert topsis(G).index == 1


def test_zero_weight_tie_never_picks_a_dominated_row():
    # with the energy weight 0, rows 0 and 1 tie on latency; row 0 is dominated by row 1
    F = np.array([[1.0, 5.0], [1.0, 3.0], [2.0, 0.0]])
    assert topsis(F, weights=[1, 0]).index == 1
    assert topsis(F, weights=[1, 0], variant="classic").index == 1


def test_constant_and_zero_columns_do_not_divide_by_zero():
    F = np.array([[1.0, 7.0, 0.0], [2.0, 7.0, 0.0], [0.5, 7.0, 0.0]])
    with np.errstate(all="raise"):
        assert topsis(F).index == 2
        assert topsis(F, variant="classic").index == 2
    same = np.ones((3, 2))
    with np.errstate(all="raise"):
        ch = topsis(same, variant="classic")
    assert ch.index == 0 and ch.score == 1.0


def test_all_infeasible_is_a_clear_error():
    with pytest.raises(ConstraintError, match="none of the 3 candidate"):
        topsis(np.ones((3, 2)), feasible=[False, False, False])


@pytest.mark.parametrize("weights, match", [
    ([1, 1], "has 2 value"), ([1, -1, 1], "weight -1 is not valid"), ([0, 0, 0], "all zero"),
    ([1, float("nan"), 1], "not valid"),
])
def test_bad_weights(weights, match):
    with pytest.raises(ConfigError, match=match):
        topsis(np.ones((2, 3)), weights=weights)


def test_unknown_variant():
    with pytest.raises(ConfigError, match="unknown TOPSIS variant 'best'"):
        topsis(np.ones((2, 2)), variant="best")


def _dominated(F: np.ndarray, i: int, ok: np.ndarray) -> bool:
    others = F[ok]
    return bool(((others <= F[i]).all(axis=1) & (others < F[i]).any(axis=1)).any())


@pytest.mark.parametrize("variant", ["paper", "classic"])
def test_choice_is_never_dominated_nor_infeasible(variant):
    rng = np.random.default_rng(7)
    for _ in range(400):
        n, m = int(rng.integers(1, 30)), int(rng.integers(1, 4))
        # few distinct values -> many ties and dominated duplicates
        F = rng.integers(0, 4, size=(n, m)).astype(float) * rng.choice([1e-3, 1.0, 1e6], size=m)
        ok = rng.random(n) < 0.7
        if not ok.any():
            ok[int(rng.integers(n))] = True
        w = rng.choice([0.0, 0.5, 1.0, 3.0], size=m)
        if w.sum() == 0:
            w[0] = 1.0
        ch = topsis(F, feasible=ok, weights=w, variant=variant)
        assert ok[ch.index]
        assert not _dominated(F, ch.index, ok), (F, ok, w, ch.index)
