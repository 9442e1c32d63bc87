"""edge.inverse.hook: the hook acts only through the port the daemon hands it (issue 10)."""

from __future__ import annotations

import numpy as np
import pytest

from edge import inverse as EI
from edge.daemon.commands import CommandError, CommandRegistry
from edge.estimator import Estimator
from tests.helpers import chain_bundle, chain_matrices

K_SPRING = 1e4  # chain spring stiffness [N/m] of tests.helpers.chain_matrices


class StrictDaemon:
    """A daemon stand-in on which only ``inverse`` may be set or read: the hook reaching
    into anything else (``acq.source``, ``est.bundle``, ``pub``) fails the test."""

    def __setattr__(self, key, value):
        if key != "inverse":
            raise AssertionError(f"the hook assigned daemon.{key}")
        object.__setattr__(self, key, value)

    def __getattr__(self, key):
        raise AssertionError(f"the hook reached into daemon.{key}")


def _parametric_bundle(n=4):
    """Chain bundle whose parametric model has one parameter, the spring stiffness k:
    K(k) = K0 + (k - k0) K0 / k0 exactly (the chain's K is linear in k), M fixed."""
    M, C, K = chain_matrices(n, k=K_SPRING)
    parts = EI.Parts(names=("k",), kinds=("spring",), theta0=np.array([K_SPRING]), M0=M, K0=K,
                     dM=np.zeros((1, n, n)), dK=(K / K_SPRING)[None], rayleigh=(1.0, 1e-4))
    arrays, pmeta = parts.to_extras()
    b = chain_bundle(n=n, window=3).replace(extras=arrays,
                                            meta={"name": "chain",
                                                  "inverse": {"maps": {}, "parts": pmeta}})
    return b, parts


def test_update_model_goes_through_the_port_only():
    b, parts = _parametric_bundle()
    est = Estimator(b)
    sent, swaps = [], []

    def swap(op, nb):
        swaps.append(nb)
        est.swap(op, bundle=nb)

    d = StrictDaemon()
    port = EI.InversePort(bundle=lambda: est.bundle, swap=swap,
                          publish=lambda topic, obj: sent.append((topic, obj)), nch=1)
    hook = EI.InverseHook.attach(d, port)
    assert d.inverse is hook
    reg = CommandRegistry()
    EI.register_commands(reg)
    reply = reg.commands["update_model"].handler(d, {"params": {"k": 2 * K_SPRING}})
    # the estimator now runs K(2 k0) = 2 K0 (closed form: K linear in k; float64 sums, 1e-12)
    np.testing.assert_allclose(est.bundle.K, 2 * b.K, rtol=1e-12, atol=1e-12 * K_SPRING)
    assert swaps == [est.bundle] and est.bundle.M is not b.M
    topic, payload = sent[-1]
    assert topic == "meta" and payload["model_id"] == reply["model_id"]
    assert payload["params"] == {"k": 2 * K_SPRING}
    # a bundle without maps: identify is refused with the reason, nothing armed
    with pytest.raises(CommandError, match="no inverse map"):
        reg.commands["identify"].handler(d, {})
    assert hook.pending is None


def test_locked_updates_and_no_hook_are_refused_with_the_reason():
    b, _ = _parametric_bundle()
    est = Estimator(b)
    d = StrictDaemon()
    reg = CommandRegistry()
    EI.register_commands(reg)
    d.inverse = None
    with pytest.raises(CommandError, match="runs no inverse maps"):
        reg.commands["update_model"].handler(d, {"params": {"k": 1.0}})
    EI.InverseHook.attach(d, EI.InversePort.of(est, locked=lambda: "bundle signature did "
                                                                   "not verify"))
    K_before = est.bundle.K.copy()
    with pytest.raises(CommandError, match="bundle signature did not verify"):
        reg.commands["update_model"].handler(d, {"params": {"k": 2 * K_SPRING}})
    np.testing.assert_array_equal(est.bundle.K, K_before)  # unchanged: exact
