"""The demo rig's strip, written once: ``examples/strip.toml``.

The load zoo (:mod:`offline.load.zoo`), the hybrid demo (:mod:`offline.hybrid.demo`), the
accuracy benchmark and the tests build on the same 170 x 13 x 1.2 mm aluminium strip as
Euler-Bernoulli beam elements; they read its material, section and member from the example
file (the lines up to :data:`MARKER`) and add their own boundaries, sensors and loads.
"""

from __future__ import annotations

import re
from pathlib import Path

#: the example model file of the strip
STRIP_FILE = Path(__file__).resolve().parents[2] / "examples" / "strip.toml"
#: the line that ends the strip's own description in :data:`STRIP_FILE`
MARKER = "# ---- end of the strip"


def strip_text() -> str:
    """The whole example model file of the strip."""
    try:
        return STRIP_FILE.read_text(encoding="utf-8")
    except OSError as exc:
        raise FileNotFoundError(f"{STRIP_FILE}: the strip's example model file is missing "
                                f"({exc.strerror}); it ships with the source tree") from None


def strip_head(n_elements=34, name: str = "strip") -> str:
    """Model-file head of the strip: ``name``, type, material, beam section and the member
    as ``n_elements`` elements along x (an int, or a placeholder string replaced later);
    boundaries, sensors and the rest are the caller's."""
    text = strip_text()
    head = text[:text.index(MARKER)]
    head = re.sub(r'^name = "strip"$', f'name = "{name}"', head, count=1, flags=re.M)
    return re.sub(r"n = 34 }", f"n = {n_elements} }}", head, count=1)
