"""The automatic choice prefers the Kalman smoother within SMOOTHER_MARGIN of the best
candidate's score (offline/selection.py): it states its std and follows the load's level,
which a lead on runs drawn from the declaration does not outweigh."""

from types import SimpleNamespace

import pytest

from offline.selection import SMOOTHER_MARGIN, Candidate, select


def _design(name, score):
    def design(bundle, runs, windows, alpha_rule, progress=False, reference=None):
        row = {"score": score, "window": 1, "alpha": 0.0}
        # a bundle made by the candidate itself: select() does not re-check its stability
        return Candidate(name, row, [row], {0: SimpleNamespace(method=name)})
    return design


@pytest.mark.parametrize("factor, chosen", [
    (1.0 + 0.5 * SMOOTHER_MARGIN, "Kalman smoother"),      # within the margin
    (1.0 + 2.0 * SMOOTHER_MARGIN, "Tikhonov fixed-lag"),   # beyond it: the best score wins
    (0.9, "Kalman smoother"),                              # the best anyway
])
def test_smoother_preferred_within_the_margin(factor, chosen):
    bundle = SimpleNamespace(dt=1e-3, forces=[], outputs=[])
    sel = select(bundle, [], 0.02, windows=[1], candidates=[
        ("fixed-lag", _design("Tikhonov fixed-lag", 1.0)),
        ("smoother", _design("Kalman smoother", factor))])
    assert sel.report["chosen"] == sel.chosen == chosen
    # the typed result carries the chosen candidate's own bundle, not a hidden key
    assert sel.bundle.method == chosen and "_bundle" not in sel.report
