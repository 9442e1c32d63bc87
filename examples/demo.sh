#!/usr/bin/env bash
# The vsense demo in one command (docs/quickstart.md):
#
#   bash examples/demo.sh [--short] [--out DIR] [--broker auto|existing|mosquitto|amqtt]
#                         [--duration S] [--level signal|adc]
#
# 1. creates a virtual environment (.venv, or $VSENSE_VENV) with vsense[offline,demo];
# 2. builds the bundle of the paper's cantilever (examples/paper_cantilever.toml) while the
#    full FE model simulates the rig (random force 5-160 Hz at 110 mm, laser at 110 mm with
#    1 % noise, reference displacement at 60 mm);
# 3. uses an MQTT broker on localhost:1883 if one answers, else starts mosquitto on a free
#    port if installed, else an embedded broker (amqtt, pip-installed in step 1);
# 4. runs the edge daemon (vsense-edge run --simulate) for 20 s at 1,000 samples/s in real
#    time and collects its estimates over MQTT;
# 5. writes DIR/report/index.html (default DIR: demo-out) and prints where it is.
#
# Extra arguments go to `python -m offline.demo` (see --help). No sudo, no system packages.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VSENSE_VENV:-.venv}"
PY="$VENV/bin/python"

if [ ! -x "$PY" ]; then
  echo "==> creating $VENV"
  python3 -m venv "$VENV"
fi
# install once per pyproject.toml version (the marker holds its checksum)
MARK="$VENV/.vsense-demo-installed"
SUM="$(cksum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$MARK" ] || [ "$(cat "$MARK")" != "$SUM" ] \
   || ! "$PY" -c "import offline.demo, amqtt, scipy, matplotlib" >/dev/null 2>&1; then
  echo "==> installing vsense[offline,demo] into $VENV (first run: a few minutes)"
  "$PY" -m pip install -q --upgrade pip >/dev/null
  "$PY" -m pip install -q -e ".[offline,demo]"
  echo "$SUM" > "$MARK"
fi

exec "$PY" -m offline.demo "$@"
