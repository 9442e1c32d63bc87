"""Greedy forward selection plus exchange passes over the candidates, with costs and a budget.

Each step adds the candidate that lowers the score most, then exchanges chosen sensors for
unchosen ones while that lowers it further (``passes`` passes at most), so the layout of
every size 1..N is greedy-plus-exchange optimal, and the next step starts from it.

The criterion of a layout is the weighted mean of the targets' predicted errors
(:meth:`~offline.placement.criterion.PlacementModel.nrmse`): of ``log NRMSE`` (default: a
geometric mean, so a force at 0.4 and an output at 0.004 count by their relative improvement
and the larger error does not drown the smaller) or of the NRMSE itself (``criterion =
"linear"``). Each step ranks every feasible candidate by the frequency-domain proxy
(:mod:`offline.placement.screen`) and evaluates the best ``screen`` of them exactly; with a
budget the step maximises the decrease of the criterion per unit cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from offline._deps import progress as _progress
from offline.placement.screen import screen as make_screen


@dataclass
class Placement:
    """Result of :func:`place`.

    order : list of int       the chosen candidates, in the order they are written (a
                              candidate swapped in by an exchange takes the place of the one
                              it replaced)
    nrmse : (N + 1, nq)       predicted NRMSE of the best layout found of each size k (row k;
                              row 0: the sensors kept only)
    score : (N + 1,)          the criterion of the same layouts
    layouts : list            candidate indices of each of these layouts
    added, swaps : list       per size: the candidate the greedy step added; the exchanges
                              (out, in) that followed it
    exchanges : int           accepted exchanges
    evaluations : int         exact (Riccati) evaluations
    """

    order: list
    nrmse: np.ndarray
    score: np.ndarray
    layouts: list = field(default_factory=list)
    added: list = field(default_factory=list)
    swaps: list = field(default_factory=list)
    exchanges: int = 0
    evaluations: int = 0
    cost: float = 0.0


class Criterion:
    """Weighted criterion with a cache of exact evaluations (layouts as frozensets)."""

    def __init__(self, pm, weights=None, linear: bool = False):
        self.pm = pm
        w = np.ones(len(pm.targets)) if weights is None else np.asarray(weights, float)
        if not np.any(w > 0):
            raise ValueError("[placement].weights: every weight is 0")
        w = w / w.max()  # then w.sum() is finite for weights up to the float range's end
        self.w, self.linear = w / w.sum(), linear
        self.cache, self.evaluations = {}, 0

    def nrmse(self, layout) -> np.ndarray:
        key = frozenset(int(i) for i in layout)
        if key not in self.cache:
            self.cache[key] = self.pm.nrmse(sorted(key))
            self.evaluations += 1
        return self.cache[key]

    def __call__(self, layout) -> float:
        e = self.nrmse(layout)
        return float(e @ self.w if self.linear else np.log(np.maximum(e, 1e-300)) @ self.w)


def place(pm, n: int, *, weights=None, budget=None, linear: bool = False, screen: int = 6,
          passes: int = 3, proxy=None, progress: bool = True) -> Placement:
    """Choose ``n`` candidates of ``pm`` (:class:`~offline.placement.criterion.PlacementModel`).

    Parameters
    ----------
    weights : (nq,) per target (default all 1);  budget : total cost allowed (None: none)
    linear : criterion on the NRMSE instead of its log
    screen : exact evaluations per step (the best by the proxy); 0 or >= the candidates:
        every candidate exactly (no proxy)
    passes : exchange passes after each greedy step (0: none)
    proxy : :class:`offline.placement.screen.Screen` (built when needed)
    """
    ncand = len(pm.candidates)
    if n < 1:
        raise ValueError(f"-n must be >= 1, got {n}")
    if n > ncand:
        raise ValueError(f"-n {n}: only {ncand} candidates")
    crit = Criterion(pm, weights, linear)
    cost = np.asarray(pm.cost, float)
    exact = screen <= 0 or screen >= ncand
    if not exact and proxy is None:
        proxy = make_screen(pm)
    budget = np.inf if budget is None else float(budget)

    def best_of(layout, pool, drop=None):
        """Best candidate of ``pool`` to add to ``layout`` (minus ``drop``): (index, value)."""
        base = [i for i in layout if i != drop]
        spent = cost[base].sum()
        pool = [j for j in pool if spent + cost[j] <= budget * (1 + 1e-12)]
        if not pool:
            return None, np.inf
        if not exact and len(pool) > screen:
            ps = proxy.scores(base, crit.w, linear)[pool]
            if np.isfinite(budget) and drop is None:  # decrease per unit cost, best first
                ps = -(proxy.value(base, crit.w, linear) - ps) / np.maximum(cost[pool], 1e-12)
            pool = [pool[k] for k in np.argsort(ps, kind="stable")[:screen]]
        vals = np.array([crit(base + [j]) for j in pool])
        if np.isfinite(budget) and drop is None:  # decrease per unit cost
            now = crit(base)
            k = int(np.argmax((now - vals) / np.maximum(cost[pool], 1e-12)))
        else:
            k = int(np.argmin(vals))
        return pool[k], float(vals[k])

    chosen, layouts, added, swapped = [], [[]], [None], [[]]
    bar = _progress(total=n, desc="placing", enable=progress)
    for _ in range(n):
        j, _v = best_of(chosen, [i for i in range(ncand) if i not in chosen])
        if j is None:
            break  # budget spent
        chosen.append(j)
        # exchange passes: each chosen sensor swapped for the best unchosen one while the
        # score improves (the new one takes its place in the order)
        swaps = []
        for _ in range(passes):
            changed = False
            for pos in range(len(chosen)):
                now = crit(chosen)
                pool = [i for i in range(ncand) if i not in chosen]
                jj, v = best_of(chosen, pool, drop=chosen[pos])
                if jj is not None and v < now - 1e-9 * max(abs(now), 1.0):
                    swaps.append((chosen[pos], jj))
                    chosen[pos] = jj
                    changed = True
            if not changed:
                break
        layouts.append(list(chosen))
        added.append(j)
        swapped.append(swaps)
        bar.update()
    bar.close()
    return Placement(order=list(chosen), nrmse=np.array([crit.nrmse(lay) for lay in layouts]),
                     score=np.array([crit(lay) for lay in layouts]), layouts=layouts,
                     added=added, swaps=swapped,
                     exchanges=sum(len(x) for x in swapped), evaluations=crit.evaluations,
                     cost=float(cost[chosen].sum()))


def exhaustive(pm, n: int, weights=None, linear: bool = False):
    """Best layout of ``n`` candidates by enumeration (small sets only): (layout, value)."""
    from itertools import combinations

    crit = Criterion(pm, weights, linear)
    best = min(combinations(range(len(pm.candidates)), n), key=lambda c: crit(list(c)))
    return list(best), crit(list(best))
