#!/usr/bin/env bash
# The edge-only test tier in a clean virtual environment with the base install alone
# (`pip install .` plus pytest: numpy, numba, onnxruntime, paho-mqtt; no scipy, no extras),
# as on a Raspberry Pi. Selects `pytest -m edge` (tests/conftest.py EDGE_MODULES) and fails if
# scipy or the offline stack is importable in that environment. Extra arguments go to pytest.
#   bash tests/edge_tier.sh [-q]        # venv in .venv-edge (VSENSE_EDGE_VENV to change)
# tests/arm64.sh runs the same tier on arm64 under emulation.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VSENSE_EDGE_VENV:-.venv-edge}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "==> creating $VENV"
  python3 -m venv "$VENV"
fi
echo "==> installing vsense (base install only) and pytest into $VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
# non-editable, so that `offline`'s extras cannot leak in from the source tree's environment
"$VENV/bin/python" -m pip install -q . "pytest>=8" "pytest-timeout>=2.3"
"$VENV/bin/python" - <<'PY'
import importlib.util, sys
bad = [m for m in ("scipy", "sklearn", "matplotlib", "gmsh", "meshio", "amqtt")
       if importlib.util.find_spec(m) is not None]
if bad:
    sys.exit(f"edge_tier.sh: {bad} importable in the base environment; it is not clean")
PY
echo "==> running the edge tier (pytest -m edge)"
exec "$VENV/bin/python" -m pytest -m edge -p no:cacheprovider "$@"
