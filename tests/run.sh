#!/usr/bin/env bash
# The test command (README "Quick start", step 2; .ci/run calls exactly this).
# Creates a virtual environment with the offline, mesh (gmsh), test and fast (PARDISO) extras,
# installs Mosquitto, Chromium and chromium-driver from Debian's packages when they are missing
# (the MQTT tests start their own broker on a free loopback port), then runs the whole suite.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VSENSE_VENV:-.venv}"

if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ]; then
  echo "==> installing mosquitto (Debian package)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq mosquitto >/dev/null
fi

# the dashboard tests drive Debian's headless Chromium through its chromedriver
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  echo "==> installing chromium and chromium-driver (Debian packages)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "==> creating $VENV"
  python3 -m venv "$VENV"
fi
echo "==> installing vsense[offline,mesh,test,fast] into $VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install -q -e ".[offline,mesh,test,fast]"

echo "==> running the tests"
exec "$VENV/bin/python" -m pytest "$@"
