# Python environment of the vsense edge on a Raspberry Pi; sourced by deploy/install.sh, which
# defines run() (print, and execute unless --dry-run), DRY and PI5 (1 on a Raspberry Pi 5).
#
# Pi 3/4: python3-spidev and python3-rpi.gpio from the distribution (prebuilt; Debian and
#   Raspberry Pi OS, bookworm and trixie, arm64 and armhf).
# Pi 5 (RP1 chip, where RPi.GPIO cannot work): python3-spidev and python3-rpi-lgpio, which
#   provides the RPi.GPIO API on lgpio. Raspberry Pi OS carries python3-rpi-lgpio; plain Debian
#   does not. Without it, pip's rpi-lgpio + lgpio wheels (lgpio >= 0.2: aarch64 wheels exist for
#   Python 3.11/3.12, i.e. bookworm, not for 3.13/trixie, where lgpio's source build needs swig
#   and liblgpio, which Debian does not carry either).
# The venv is made with --system-site-packages so that it sees those modules; vsense and its
# base dependencies (numpy, numba, onnxruntime, paho-mqtt) are wheels for aarch64. Only when the
# SPI/GPIO modules are still missing is a compiler installed to build them with pip.

_apt_candidate() {  # _apt_candidate PKG -> 0 if apt can install PKG
  local c
  c="$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')"
  [ -n "$c" ] && [ "$c" != "(none)" ]
}

_dpkg_installed() {
  dpkg-query -W -f '${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

_kernel_at_least() {  # _kernel_at_least MAJOR MINOR (VSENSE_KERNEL_RELEASE overrides uname -r)
  local v="${VSENSE_KERNEL_RELEASE:-$(uname -r)}" maj min
  maj="${v%%.*}"; min="${v#*.}"; min="${min%%[!0-9]*}"
  [ "${maj:-0}" -gt "$1" ] || { [ "${maj:-0}" -eq "$1" ] && [ "${min:-0}" -ge "$2" ]; }
}

pi_gpio_package() {  # the distribution package giving `import RPi.GPIO` on this board
  if [ "$PI5" -eq 1 ] || _dpkg_installed python3-rpi-lgpio; then
    echo python3-rpi-lgpio   # the only one that works on a Pi 5; never both (same module)
  elif _kernel_at_least 6 6 && _apt_candidate python3-rpi-lgpio; then
    # Linux 6.6+ numbers the SoC's GPIOs from 512 in sysfs, where RPi.GPIO's edge detection
    # (wait_for_edge on DRDY) looks for them: it fails there; rpi-lgpio uses /dev/gpiochip
    echo python3-rpi-lgpio
  else
    echo python3-rpi.gpio
  fi
}

pi_system_packages() {
  run apt-get update -qq
  local pkgs="python3-venv" gpio missing=""
  gpio="$(pi_gpio_package)"
  for p in python3-spidev "$gpio"; do
    if _apt_candidate "$p"; then pkgs="$pkgs $p"; else missing="$missing $p"; fi
  done
  if [ -n "$missing" ]; then
    echo "# not available from apt here:$missing (built or fetched with pip below)"
  fi
  PI_PKGS_MISSING="$missing"
  if [ "$gpio" = python3-rpi.gpio ] && _kernel_at_least 6 6 \
     && case " $missing " in *" $gpio "*) false ;; *) true ;; esac; then
    echo "# warning: Linux $(uname -r) numbers the GPIOs from 512 in sysfs, where RPi.GPIO's" \
         "edge detection fails; if vsense-edge reports it, install python3-rpi-lgpio" \
         "(Raspberry Pi OS) or pip's rpi-lgpio instead (docs/troubleshooting.md)"
  fi
  if [ "$gpio" = python3-rpi-lgpio ] && _dpkg_installed python3-rpi.gpio; then
    # both install the module RPi.GPIO: the rpi-lgpio documentation removes the other first
    run env DEBIAN_FRONTEND=noninteractive apt-get remove -y -q python3-rpi.gpio
  fi
  echo "# Pi packages from the distribution: $pkgs"
  run env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $pkgs
}

_py_has() {  # _py_has PYTHON check-code -> 0 if the check passes
  "$1" -c "$2" >/dev/null 2>&1
}

# SPI and GPIO importable (found, not imported: RPi.GPIO refuses to import off a Pi); on a
# Pi 5 also a real lgpio (pip's lgpio 0.0.0.2 is an empty module).
_PI_MODULES_CHECK='
import importlib.util as u, sys
ok = u.find_spec("spidev") is not None and u.find_spec("RPi") is not None \
    and u.find_spec("RPi.GPIO") is not None
if ok and sys.argv[-1] == "pi5":
    import lgpio
    ok = hasattr(lgpio, "gpiochip_open")
sys.exit(0 if ok else 1)'

pi_modules_ok() {  # pi_modules_ok PYTHON
  local board=pi; [ "$PI5" -eq 1 ] && board=pi5
  "$1" -c "$_PI_MODULES_CHECK" "$board" >/dev/null 2>&1
}

pi_python_env() {  # pi_python_env VENV SRC
  local venv="$1" src="$2" py
  if [ ! -x "$venv/bin/python" ]; then
    run python3 -m venv --system-site-packages "$venv"
  elif grep -q "^include-system-site-packages = false" "$venv/pyvenv.cfg" 2>/dev/null; then
    # a venv of an older install.sh: let it see the distribution's SPI/GPIO modules
    run sed -i 's/^include-system-site-packages = false/include-system-site-packages = true/' \
      "$venv/pyvenv.cfg"
  fi
  # vsense with its base dependencies, all from wheels (fails rather than compiles numpy & co.)
  run "$venv/bin/pip" install -q --only-binary :all: "$src"
  py="$venv/bin/python"; [ -x "$py" ] || py=python3   # dry run: the venv sees python3's modules
  if pi_modules_ok "$py"; then
    echo "# SPI and GPIO modules: from the distribution (nothing compiled)"
    return 0
  fi
  if [ "$DRY" -eq 1 ] && [ -z "${PI_PKGS_MISSING:-}" ]; then
    echo "# dry run: SPI and GPIO modules will come from the apt packages above"
    return 0
  fi
  if [ "$PI5" -eq 1 ] || _kernel_at_least 6 6; then
    # Pi 5, or Linux 6.6+ (RPi.GPIO's edge detection fails), without python3-rpi-lgpio: the
    # lgpio wheel exists for Python 3.11/3.12 only (>= 0.2: pip would otherwise pick lgpio
    # 0.0.0.2, an empty module, for Python 3.13)
    if python3 -c 'import sys; sys.exit(sys.version_info >= (3, 13))' \
       && run "$venv/bin/pip" install -q --only-binary :all: "lgpio>=0.2" "rpi-lgpio>=0.6"; then
      if [ "$DRY" -eq 1 ] || pi_modules_ok "$venv/bin/python"; then
        echo "# rpi-lgpio and lgpio from pip wheels"
        return 0
      fi
    fi
  fi
  if [ "$PI5" -eq 1 ]; then
    echo "install.sh: Raspberry Pi 5 needs rpi-lgpio: no python3-rpi-lgpio package on this" \
         "system and no lgpio wheel for $(python3 -V). Use Raspberry Pi OS (apt install" \
         "python3-rpi-lgpio), or build lgpio from source (swig, liblgpio)." >&2
    [ "$DRY" -eq 1 ] || return 1
    return 0
  fi
  # Pi 3/4 without the distribution packages: build spidev and RPi.GPIO with a compiler
  echo "# fallback: building spidev and RPi.GPIO with pip (installs gcc and python3-dev)"
  run env DEBIAN_FRONTEND=noninteractive apt-get install -y -q gcc libc6-dev python3-dev
  run "$venv/bin/pip" install -q "spidev>=3.6" "RPi.GPIO>=0.7"
  if [ "$DRY" -eq 0 ] && ! pi_modules_ok "$venv/bin/python"; then
    echo "install.sh: spidev/RPi.GPIO still not importable in $venv after building them" >&2
    return 1
  fi
}
