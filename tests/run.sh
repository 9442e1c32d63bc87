#!/usr/bin/env bash
# The test command (README "Try it"; .ci/run calls it).
#
#   bash tests/run.sh [pytest args]       everything (CI)
#   bash tests/run.sh --fast [args]       the edit-test loop: tests not marked slow (< 60 s)
#   bash tests/run.sh --lint              ruff with the rules of pyproject.toml [tool.ruff]
#   bash tests/run.sh --reliability [args] the quick reliability check (tests/reliability_tests.txt)
#
# Creates .venv-test (or $VSENSE_TEST_VENV) with the offline, mesh (gmsh), test, fast (PARDISO),
# lint and hybrid (JAX) extras: not the demo's .venv, which keeps the workstation extras only. Installs
# Mosquitto, PostgreSQL, Chromium and chromium-driver from Debian's packages when they are
# missing (the MQTT tests start their own broker on a free loopback port, the historian tests
# their own PostgreSQL cluster; the dashboard and report tests drive the headless Chromium). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VSENSE_TEST_VENV:-.venv-test}"
MODE=all
case "${1:-}" in
  --fast) MODE=fast; shift ;;
  --lint) MODE=lint; shift ;;
  --reliability) MODE=reliability; shift ;;
esac

if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ]; then
  echo "==> installing mosquitto (Debian package)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq mosquitto >/dev/null
fi

# the historian tests start their own throwaway PostgreSQL cluster (initdb + pg_ctl)
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "==> installing postgresql (Debian package)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
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
# install once per pyproject.toml version (the marker holds its checksum)
MARK="$VENV/.vsense-test-installed"
SUM="$(cksum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$MARK" ] || [ "$(cat "$MARK")" != "$SUM" ]; then
  echo "==> installing vsense[offline,mesh,test,fast,lint,hybrid] into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$VENV/bin/python" -m pip install -q -e ".[offline,mesh,test,fast,lint,hybrid]"
  echo "$SUM" > "$MARK"
fi

case "$MODE" in
  lint)
    echo "==> ruff check (rules: pyproject.toml [tool.ruff])"
    exec "$VENV/bin/ruff" check "$@" . ;;
  reliability)
    echo "==> running the quick reliability check (tests/reliability_tests.txt)"
    exec "$VENV/bin/python" -m pytest -m reliability -p no:cacheprovider "$@" ;;
  fast)
    echo "==> running the fast tier (not slow)"
    exec "$VENV/bin/python" -m pytest -m "not slow" -p no:cacheprovider "$@" ;;
  *)
    # one worker per core (VSENSE_TEST_WORKERS=0: in this process); a test module's
    # fixtures stay on one worker (--dist loadfile)
    WORKERS="${VSENSE_TEST_WORKERS:-auto}"
    echo "==> running the tests ($WORKERS workers)"
    if [ "$WORKERS" = "0" ]; then exec "$VENV/bin/python" -m pytest "$@"; fi
    exec "$VENV/bin/python" -m pytest -n "$WORKERS" --dist loadfile "$@" ;;
esac
