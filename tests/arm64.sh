#!/usr/bin/env bash
# vsense's edge on arm64 (the Raspberry Pi's architecture) under qemu-user emulation (issue 14).
#
#   sudo bash tests/arm64.sh [--suite bookworm|trixie] [--install-suites "bookworm trixie"]
#                            [--no-tests] [--no-runs] [--no-install] [--fresh] [-- PYTEST ARGS]
#
# 1. Host: installs qemu-user-static, binfmt-support and mmdebstrap from Debian if missing and
#    registers qemu-aarch64 with binfmt_misc (fails with a clear message when it cannot).
# 2. Builds a Debian arm64 root file system per suite with mmdebstrap (python3, venv,
#    ca-certificates, systemd), cached as ~/.cache/vsense-arm64/base-<suite>.tar; a test root
#    (+ Mosquitto, a venv with vsense's base dependencies from aarch64 wheels and pytest) is cached
#    as test-<suite>-<hash of pyproject.toml>.tar. --fresh drops the cache.
# 3. Runs the edge-only test tier (`pytest -m edge`, base install only) in the test root.
# 4. Builds a bundle and a measurement with the host's .venv (x86-64, offline extra), replays it
#    on x86 and on arm64, runs the daemon on the simulated ADC on both against a Mosquitto on the
#    host, and compares the estimates (tests/arm64_compare.py; tolerance 1e-7 of the signal RMS).
# 5. For each install suite: deploy/install.sh --dry-run, then a real run (--no-start,
#    --with-mosquitto) in a fresh copy of the base root; checks that no compiler got installed and
#    that the venv sees spidev and RPi.GPIO; a Pi 5 dry run says what a Pi 5 gets.
# Prints the test count, the agreement figures and the time of every step; exits non-zero on the
# first failure. Two qemu traps are handled: onnxruntime's CPU probe crashes on the host's x86
# /proc/cpuinfo (an ARM Cortex-A72 one is bind-mounted), and qemu's default CPU advertises SVE,
# so OpenBLAS picks kernels that make an SVD fail (QEMU_CPU=cortex-a72).
# Needs root (chroot, mounts), the package registries, and a host environment with
# vsense[offline] for steps 4-5: $VSENSE_VENV, else .venv-test (bash tests/run.sh), else .venv
# (bash examples/demo.sh); with none, .venv-test is made first by bash tests/run.sh.
# Another script may source this file for its functions (no options, no main).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${VSENSE_ARM64_CACHE:-$HOME/.cache/vsense-arm64}"
WORK="${VSENSE_ARM64_WORK:-/var/tmp/vsense-arm64}"
MIRROR="${VSENSE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# the host's environment (x86-64, offline extra): $VSENSE_VENV, else .venv-test, else .venv
HOST_VENV="${VSENSE_VENV:-}"
if [ -z "$HOST_VENV" ]; then
  HOST_VENV="$REPO/.venv-test"
  [ ! -x "$HOST_VENV/bin/python" ] && [ -x "$REPO/.venv/bin/python" ] && HOST_VENV="$REPO/.venv"
fi
SUITE=bookworm; INSTALL_SUITES="bookworm trixie"; TESTS=1; RUNS=1; INSTALL=1; FRESH=0
PYTEST_ARGS=()
# sourced: only the functions and settings, no options, no main
ARM64_SOURCED=0; [ "${BASH_SOURCE[0]}" != "$0" ] && ARM64_SOURCED=1
while [ "$ARM64_SOURCED" -eq 0 ] && [ $# -gt 0 ]; do
  case "$1" in
    --suite) SUITE="$2"; shift ;;
    --install-suites) INSTALL_SUITES="$2"; shift ;;
    --no-tests) TESTS=0 ;;
    --no-runs) RUNS=0 ;;
    --no-install) INSTALL=0 ;;
    --fresh) FRESH=1 ;;
    --) shift; PYTEST_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "arm64.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "arm64.sh: needs root (chroot and mounts)" >&2; exit 1; }

T_START=$(date +%s)
SUMMARY=()
log() { echo "[arm64 +$(( $(date +%s) - T_START ))s] $*"; }
step() {  # step NAME CMD...: run, time, remember
  local name="$1" t0; shift
  t0=$(date +%s)
  log "== $name"
  "$@"
  SUMMARY+=("$(printf '%-44s %5d s' "$name" $(( $(date +%s) - t0 )))")
}
note() { SUMMARY+=("$*"); log "$*"; }

# ----------------------------------------------------------------------------- mounts
MOUNTS=()
BROKER_PID=""; COLLECT_PID=""
cleanup() {
  local i
  [ -n "$COLLECT_PID" ] && kill "$COLLECT_PID" 2>/dev/null
  [ -n "$BROKER_PID" ] && kill "$BROKER_PID" 2>/dev/null
  for (( i=${#MOUNTS[@]}-1; i>=0; i-- )); do umount -l "${MOUNTS[i]}" 2>/dev/null || true; done
  MOUNTS=()
}
trap cleanup EXIT

CPUINFO="$WORK/cpuinfo-cortex-a72"
write_cpuinfo() {  # /proc/cpuinfo of a Raspberry Pi 4 (4 x Cortex-A72), for onnxruntime's probe
  local i
  : > "$CPUINFO"
  for i in 0 1 2 3; do
    printf 'processor\t: %d\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\n' \
      "$i" >> "$CPUINFO"
    printf 'CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\n' >> "$CPUINFO"
    printf 'CPU part\t: 0xd08\nCPU revision\t: 3\n\n' >> "$CPUINFO"
  done
  printf 'Revision\t: c03111\nModel\t\t: Raspberry Pi 4 Model B Rev 1.1\n' >> "$CPUINFO"
}

enter() {  # enter ROOT: mounts for a chroot (proc with ARM cpuinfo, sys, dev, pip cache)
  local r="$1" suite="$2"
  mount -t proc proc "$r/proc"; MOUNTS+=("$r/proc")
  mount --bind "$CPUINFO" "$r/proc/cpuinfo"; MOUNTS+=("$r/proc/cpuinfo")
  mount --rbind /sys "$r/sys"; mount --make-rslave "$r/sys"; MOUNTS+=("$r/sys")
  mount --rbind /dev "$r/dev"; mount --make-rslave "$r/dev"; MOUNTS+=("$r/dev")
  mkdir -p "$CACHE/pip-$suite" "$r/root/.cache/pip"
  mount --bind "$CACHE/pip-$suite" "$r/root/.cache/pip"; MOUNTS+=("$r/root/.cache/pip")
  cp /etc/resolv.conf "$r/etc/resolv.conf"
  # the host's CA bundle, for pip (the registries may be reached through the host's CAs)
  cp /etc/ssl/certs/ca-certificates.crt "$r/etc/ssl/host-ca-bundle.crt" 2>/dev/null || true
}
leave() { cleanup; }

inside() {  # inside ROOT SCRIPT: run a bash script in the arm64 root
  local r="$1"; shift
  chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb QEMU_CPU="${ARM64_QEMU_CPU:-cortex-a72}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_CERT=/etc/ssl/host-ca-bundle.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_DEFAULT_TIMEOUT=180 PIP_ROOT_USER_ACTION=ignore DEBIAN_FRONTEND=noninteractive \
    bash -euo pipefail -c "$*"
}

fresh_root() {  # fresh_root TAR ROOT: extract a cached tarball into an empty ROOT
  rm -rf "$2"; mkdir -p "$2"
  tar -C "$2" -xf "$1"
}

copy_source() {  # the working tree (tracked and untracked, not ignored) into ROOT/src
  mkdir -p "$1/src"
  (cd "$REPO" && git ls-files -co --exclude-standard -z \
     | xargs -0 -I{} sh -c '[ -e "{}" ] && printf "%s\0" "{}"' \
     | tar --null -T - -cf -) | tar -C "$1/src" -xf -
}

# ----------------------------------------------------------------------------- host
host_venv() {  # the host environment of steps 4-5, made by tests/run.sh when missing
  [ -x "$HOST_VENV/bin/python" ] && return 0
  if [ -n "${VSENSE_VENV:-}" ]; then
    echo "arm64.sh: VSENSE_VENV=$VSENSE_VENV has no bin/python: point it at an environment" \
         "with vsense[offline] installed (bash tests/run.sh makes .venv-test, bash" \
         "examples/demo.sh makes .venv)" >&2
    exit 1
  fi
  log "no host environment (.venv-test or .venv): making .venv-test with bash tests/run.sh" \
      "(a few minutes)"
  if ! VSENSE_TEST_VENV="$REPO/.venv-test" bash "$REPO/tests/run.sh" --co -q >/dev/null \
     || [ ! -x "$REPO/.venv-test/bin/python" ]; then
    echo "arm64.sh: bash tests/run.sh could not make $REPO/.venv-test; make it (or .venv with" \
         "bash examples/demo.sh) yourself, or set VSENSE_VENV" >&2
    exit 1
  fi
  HOST_VENV="$REPO/.venv-test"
}

host_setup() {
  local need=""
  command -v qemu-aarch64-static >/dev/null || need="$need qemu-user-static"
  command -v update-binfmts >/dev/null || need="$need binfmt-support"
  command -v mmdebstrap >/dev/null || need="$need mmdebstrap"
  if [ -n "$need" ]; then
    log "installing$need (Debian packages)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
  fi
  if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || {
      echo "arm64.sh: cannot mount binfmt_misc here; aarch64 programs cannot be started" \
           "transparently, so a chroot cannot run (needs a privileged host)" >&2; exit 1; }
  fi
  update-binfmts --enable qemu-aarch64 2>/dev/null || true
  if ! grep -q '^enabled' /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null \
     || ! grep -q '^flags: .*F' /proc/sys/fs/binfmt_misc/qemu-aarch64; then
    echo "arm64.sh: qemu-aarch64 is not registered with binfmt_misc (flag F needed so the" \
         "interpreter works inside a chroot): see update-binfmts --display qemu-aarch64" >&2
    exit 1
  fi
  host_venv
  mkdir -p "$CACHE" "$WORK"
  write_cpuinfo
  log "qemu: $(qemu-aarch64-static --version | head -1); cache $CACHE"
}

base_tar() { echo "$CACHE/base-$1.tar"; }
build_base() {  # Debian arm64, minimal + what a Raspberry Pi OS Lite has that matters here
  local suite="$1" tar; tar="$(base_tar "$1")"
  if [ -f "$tar" ]; then log "cached: $tar"; return; fi
  mmdebstrap --mode=root --format=tar --arch=arm64 --variant=apt \
    --include=python3,python3-venv,ca-certificates,systemd,systemd-sysv,procps \
    "$suite" "$tar.tmp" "$MIRROR"
  mv "$tar.tmp" "$tar"
}

base_deps() {  # project.dependencies of pyproject.toml, shell-quoted, one line
  "$HOST_VENV/bin/python" -c 'import tomllib,sys; d=tomllib.load(open(sys.argv[1],"rb"));
print(" ".join(repr(x) for x in d["project"]["dependencies"]))' "$REPO/pyproject.toml"
}
test_tar() {
  # keyed by what goes into it: the base dependencies of pyproject.toml and TEST_PKGS
  echo "$CACHE/test-$1-$( (base_deps; echo "$TEST_PKGS") | sha256sum | cut -c1-12).tar"
}
TEST_PKGS="'pytest>=8' 'pytest-timeout>=2.3' 'setuptools>=77' wheel; apt: mosquitto"
build_test_root() {  # base + Mosquitto + venv with the base dependencies and pytest
  local suite="$1" tar r deps
  tar="$(test_tar "$suite")"
  if [ -f "$tar" ]; then log "cached: $tar"; return; fi
  r="$WORK/test-$suite"
  fresh_root "$(base_tar "$suite")" "$r"
  enter "$r" "$suite"
  deps="$(base_deps)"
  inside "$r" "apt-get update -qq && apt-get install -y -q mosquitto >/dev/null
    python3 -m venv /opt/vsense-test
    /opt/vsense-test/bin/pip install -q --only-binary :all: $deps 'pytest>=8' \
      'pytest-timeout>=2.3' 'setuptools>=77' wheel
    apt-get clean"
  leave
  rm -f "$CACHE/test-$suite-"*.tar
  tar -C "$r" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
}

# ----------------------------------------------------------------------------- steps
prepare_test_root() {
  R="$WORK/run-$SUITE"
  fresh_root "$(test_tar "$SUITE")" "$R"
  copy_source "$R"
  enter "$R" "$SUITE"
  inside "$R" "/opt/vsense-test/bin/pip install -q --no-deps --no-build-isolation /src"
}

run_edge_tier() {
  local out="$WORK/edge-tier-$SUITE.log" rc=0
  inside "$R" "cd /src && /opt/vsense-test/bin/python - <<'PY'
import importlib.util, platform, sys
bad = [m for m in ('scipy', 'sklearn', 'matplotlib', 'gmsh') if importlib.util.find_spec(m)]
assert not bad, f'not a base install: {bad} importable'
print('python', platform.python_version(), platform.machine())
PY
    /opt/vsense-test/bin/python -m pytest -m edge -v -p no:cacheprovider --timeout 1500 \
      --timeout-method signal ${PYTEST_ARGS[*]:-}" \
    > "$out" 2>&1 || rc=$?
  grep -E 'FAILED|ERROR|Timeout' "$out" | head -n 20 || true
  tail -n 3 "$out"
  note "edge tier on arm64 ($SUITE): $(grep -E '^[0-9]+ (passed|failed)|(passed|failed).* in ' "$out" | tail -1)"
  [ "$rc" -eq 0 ] || { echo "arm64.sh: edge tier failed on arm64, log $out" >&2; exit 1; }
}

OUT=""
host_inputs() {  # bundle and measurement from the x86 host (offline extra)
  OUT="$WORK/runs"; rm -rf "$OUT"; mkdir -p "$OUT"
  local hb="$HOST_VENV/bin"
  (cd "$OUT" && "$hb/vsense-offline" build "$REPO/examples/paper_cantilever.toml" \
      -o cantilever.npz --quiet > build.log 2>&1) || { cat "$OUT/build.log"; exit 1; }
  (cd "$OUT" && "$hb/vsense-offline" simulate "$REPO/examples/paper_cantilever.toml" \
      --load random --band 5 160 --duration 10 --noise 0.01 --seed 1 -o run --quiet \
      > simulate.log 2>&1) || { cat "$OUT/simulate.log"; exit 1; }
  mkdir -p "$R/work"; cp "$OUT/cantilever.npz" "$OUT/run_measurement.csv" "$R/work/"
}

replay_compare() {
  "$HOST_VENV/bin/vsense-edge" replay "$OUT/run_measurement.csv" --bundle "$OUT/cantilever.npz" \
    -o "$OUT/est_x86.csv"
  inside "$R" "cd /work && /opt/vsense-test/bin/vsense-edge replay run_measurement.csv \
    --bundle cantilever.npz -o est_arm64.csv"
  note "$("$HOST_VENV/bin/python" "$REPO/tests/arm64_compare.py" csv "$OUT/est_x86.csv" \
    "$R/work/est_arm64.csv")" || true
  "$HOST_VENV/bin/python" "$REPO/tests/arm64_compare.py" csv "$OUT/est_x86.csv" \
    "$R/work/est_arm64.csv" >/dev/null
}

daemon_config() {  # daemon_config DEVICE BUNDLE RECDIR PORT > toml (from examples/bench.toml)
  sed -e "s|^id = .*|id = \"$1\"|" -e "s|^path = .*|path = \"$2\"|" \
      -e "s|^dir = .*|dir = \"$3\"|" -e "s|^port = .*|port = $4|" \
      -e "s|^host = .*|host = \"127.0.0.1\"|" -e 's|^clock = .*|clock = "virtual"|' \
      -e 's|^duration_s = .*|duration_s = 20.0|' -e 's|^log_level = .*|log_level = "warning"|' \
      "$REPO/examples/bench.toml"
}

daemon_compare() {
  local port conf
  port=$("$HOST_VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  conf="$OUT/mosquitto.conf"
  printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 100000\n' \
    "$port" > "$conf"
  /usr/sbin/mosquitto -c "$conf" > "$OUT/mosquitto.log" 2>&1 & BROKER_PID=$!
  "$HOST_VENV/bin/python" "$REPO/tests/arm64_compare.py" collect --port "$port" \
    --devices x86,arm64 --out "$OUT/mqtt" --timeout 900 & COLLECT_PID=$!
  local i=0
  until [ -e "$OUT/mqtt/ready" ]; do  # the collector writes it once subscribed
    kill -0 "$COLLECT_PID" 2>/dev/null || { echo "arm64.sh: collector died" >&2; exit 1; }
    i=$((i + 1)); [ "$i" -lt 600 ] || { echo "arm64.sh: collector not ready" >&2; exit 1; }
    sleep 0.1
  done
  daemon_config x86 "$OUT/cantilever.npz" "$OUT/rec-x86" "$port" > "$OUT/x86.toml"
  daemon_config arm64 /work/cantilever.npz /work/rec-arm64 "$port" > "$R/work/arm64.toml"
  local t0 t1
  t0=$(date +%s)
  "$HOST_VENV/bin/vsense-edge" run --simulate -c "$OUT/x86.toml"
  t1=$(date +%s)
  inside "$R" "/opt/vsense-test/bin/vsense-edge run --simulate -c /work/arm64.toml"
  note "daemon, 20 s simulated at 1 kHz, virtual clock: x86 $((t1 - t0)) s, arm64 $(( $(date +%s) - t1 )) s wall"
  wait "$COLLECT_PID"; COLLECT_PID=""
  kill "$BROKER_PID"; BROKER_PID=""
  note "$("$HOST_VENV/bin/python" "$REPO/tests/arm64_compare.py" daemon "$OUT/mqtt" \
    --devices x86,arm64)" || true
  "$HOST_VENV/bin/python" "$REPO/tests/arm64_compare.py" daemon "$OUT/mqtt" \
    --devices x86,arm64 >/dev/null
}

offline_resolves() {  # vsense[offline] has aarch64 wheels for Python 3.11 and 3.13 (no install)
  local v reqs=()
  mapfile -t reqs < <("$HOST_VENV/bin/python" -c 'import tomllib,sys
d = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(d["dependencies"] + d["optional-dependencies"]["offline"]))' "$REPO/pyproject.toml")
  for v in 3.11 3.13; do
    if ! "$HOST_VENV/bin/python" -m pip install -q --dry-run --ignore-installed \
        --target "$WORK/pip-target" --only-binary :all: --python-version "$v" \
        --platform manylinux_2_28_aarch64 --platform manylinux_2_17_aarch64 \
        --platform manylinux2014_aarch64 "${reqs[@]}" > "$WORK/offline-$v.log" 2>&1; then
      grep -v '^WARNING: Location' "$WORK/offline-$v.log" | tail -n 5
      echo "arm64.sh: vsense[offline] does not resolve to aarch64 wheels for Python $v" >&2
      exit 1
    fi
  done
  note "vsense[offline]: every requirement has an aarch64 wheel for Python 3.11 and 3.13"
}

install_check() {  # install_check SUITE: deploy/install.sh in a fresh base root
  local suite="$1" r="$WORK/install-$1" out="$WORK/install-$1.log"
  fresh_root "$(base_tar "$suite")" "$r"
  copy_source "$r"
  enter "$r" "$suite"
  inside "$r" "
    echo '### dry run'; bash /src/deploy/install.sh --dry-run --with-mosquitto
    echo '### real run'; bash /src/deploy/install.sh --no-start --with-mosquitto
    echo '### Pi 5 (dry run)'
    bash /src/deploy/install.sh --dry-run --board 'Raspberry Pi 5 Model B Rev 1.0'
    echo '### checks'
    for c in gcc cc aarch64-linux-gnu-gcc; do
      if command -v \$c >/dev/null; then echo \"compiler \$c installed\"; exit 1; fi
    done
    echo 'no compiler installed'
    /opt/vsense/venv/bin/python -c 'import importlib.util as u, platform, edge.estimator
assert u.find_spec(\"spidev\") and u.find_spec(\"RPi.GPIO\"), \"spidev/RPi.GPIO not found\"
print(\"venv sees spidev and RPi.GPIO; python\", platform.python_version())'
    /opt/vsense/venv/bin/vsense-edge check-config /etc/vsense/edge.toml
    dpkg -l python3-spidev python3-rpi.gpio mosquitto | awk '/^ii/ {print \$2, \$3}'
  " > "$out" 2>&1 || { tail -n 40 "$out"; echo "arm64.sh: install.sh failed on $suite, log $out" >&2; exit 1; }
  grep -E '^(# |### |no compiler|venv sees|python3-|mosquitto )' "$out" | sed 's/^/    /'
  note "install.sh on $suite: dry run + real run OK, no compiler; $(grep 'venv sees' "$out")"
  leave
}

# ----------------------------------------------------------------------------- main
[ "$ARM64_SOURCED" -eq 1 ] && return 0
[ "$FRESH" -eq 1 ] && { log "--fresh: dropping $CACHE"; rm -rf "$CACHE"; }
step "host setup" host_setup
SUITES_NEEDED="$SUITE"
[ "$INSTALL" -eq 1 ] && SUITES_NEEDED="$SUITE $INSTALL_SUITES"
for s in $(echo "$SUITES_NEEDED" | tr ' ' '\n' | sort -u); do
  step "base root file system ($s)" build_base "$s"
done
if [ "$TESTS" -eq 1 ] || [ "$RUNS" -eq 1 ]; then
  step "test root ($SUITE)" build_test_root "$SUITE"
  step "install vsense into the test root" prepare_test_root
  [ "$TESTS" -eq 1 ] && step "edge tier (pytest -m edge) on arm64" run_edge_tier
  if [ "$RUNS" -eq 1 ]; then
    step "bundle + measurement on x86 (offline)" host_inputs
    step "replay x86 vs arm64" replay_compare
    step "daemon x86 vs arm64 over MQTT" daemon_compare
  fi
  leave
fi
[ "$RUNS" -eq 1 ] && step "vsense[offline] resolves for aarch64" offline_resolves
if [ "$INSTALL" -eq 1 ]; then
  for s in $INSTALL_SUITES; do step "deploy/install.sh ($s)" install_check "$s"; done
fi
echo
echo "==== arm64 summary (total $(( $(date +%s) - T_START )) s)"
printf '  %s\n' "${SUMMARY[@]}"
