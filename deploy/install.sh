#!/usr/bin/env bash
# Idempotent installer of the vsense edge daemon on Raspberry Pi OS 64-bit (bookworm or trixie;
# Debian arm64 too), Raspberry Pi 3, 4 or 5.
#
#   sudo deploy/install.sh [--dry-run] [--src DIR] [--no-start] [--board MODEL]
#       [--listen ADDR]... [--websockets] [--ca-cert FILE --ca-key FILE]
#       [--tls-cert FILE --tls-key FILE --ca-file FILE] [--insecure] [--no-mosquitto]
#       [--public-key FILE | --no-signature]
#
# Creates the user `vsense` (groups spi, gpio), /opt/vsense/venv, /etc/vsense/edge.toml (kept if
# present), /var/lib/vsense, the systemd unit and a local Mosquitto broker (deploy/mosquitto.sh)
# that is closed by default: per-device credentials, an ACL (only the operator role may send
# commands), TLS with a CA made here by openssl (or yours: --ca-cert/--ca-key, or your server
# certificate: --tls-cert/--tls-key/--ca-file), listeners on 127.0.0.1 and only the addresses
# named with --listen (e.g. --listen 192.168.1.20 for operators on the LAN), WebSockets for the
# browser dashboard only with --websockets. --insecure: no TLS (credentials and ACL stay);
# --no-mosquitto: no local broker (set [mqtt] for yours). The shipped edge.toml accepts no
# commands (`[mqtt] commands = []`): list the ones you want. Bundles must be signed: a fresh
# edge.toml gets `[bundle] public_key = "/etc/vsense/signing.pub"` and `require_signature =
# true` (deploy/signing.sh), the key being --public-key FILE (your workstation's, from `python
# -m edge.signing keygen`) or a new Ed25519 pair made here (move its private half off the Pi);
# --no-signature: neither (a device whose bundles only you can reach; docs/deploy.md).
# SPI and GPIO come from the distribution's prebuilt packages (python3-spidev, python3-rpi.gpio;
# python3-rpi-lgpio on a Pi 5), seen by a venv made with --system-site-packages; vsense and its
# base dependencies are wheels, so nothing is compiled. Only when a package is missing does it
# install a compiler and build the module with pip. --dry-run prints the actions; --board
# overrides the model read from /proc/device-tree/model (e.g. "Raspberry Pi 5 Model B").
# Then put a bundle in place (see docs/daemon.md "Deployment") and start the service.
set -euo pipefail

DRY=0; MOSQ=1; START=1; BOARD=""; MQ_ARGS=(); SIGN=1; PUBKEY=""
SRC="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX=/opt/vsense
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --with-mosquitto) MOSQ=1 ;;  # the default; kept for old command lines
    --no-start) START=0 ;;
    --src) SRC="$2"; shift ;;
    --board) BOARD="$2"; shift ;;
    --no-mosquitto) MOSQ=0 ;;
    --no-signature) SIGN=0 ;;
    --public-key) PUBKEY="$2"; shift ;;
    --insecure|--websockets) MQ_ARGS+=("$1") ;;
    --listen|--ca-cert|--ca-key|--tls-cert|--tls-key|--ca-file|--tls-name)
      MQ_ARGS+=("$1" "$2"); shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

run() {  # print, and execute unless --dry-run
  echo "+ $*"
  if [ "$DRY" -eq 0 ]; then "$@"; fi
}

live() {  # run, when systemd is running (`systemctl enable` works without it; daemon-reload and
          # restart do not, e.g. in a chroot or a container: then say what was skipped)
  if [ -d /run/systemd/system ] || [ "$DRY" -eq 1 ]; then run "$@"
  else echo "# systemd is not running here (chroot/container): skipped: $*"; fi
}

if [ -n "$PUBKEY" ] && [ ! -r "$PUBKEY" ]; then
  echo "install.sh: --public-key $PUBKEY: no such readable file" >&2; exit 2
fi
if [ "$DRY" -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (sudo), or with --dry-run" >&2; exit 1
fi

MODEL="${BOARD:-$(tr -d '\0' 2>/dev/null < /proc/device-tree/model || echo unknown)}"
PI5=0
case "$MODEL" in *"Raspberry Pi 5"*) PI5=1 ;; esac
echo "# board: $MODEL; source $SRC"

# Python and the Pi's SPI/GPIO modules (functions in deploy/pi_python.sh)
. "$(dirname "$0")/pi_python.sh"
pi_system_packages
[ "$MOSQ" -eq 1 ] && run apt-get install -y mosquitto openssl

# user and groups (spi/gpio exist on Raspberry Pi OS; created if missing)
for g in spi gpio; do
  getent group "$g" >/dev/null || run groupadd --system "$g"
done
if ! id vsense >/dev/null 2>&1; then
  run useradd --system --home-dir /var/lib/vsense --shell /usr/sbin/nologin vsense
fi
run usermod -a -G spi,gpio vsense

# directories
run install -d -m 0755 "$PREFIX"
run install -d -m 0750 -o root -g vsense /etc/vsense
run install -d -m 0750 -o vsense -g vsense /var/lib/vsense /var/lib/vsense/recordings
run install -d -m 0750 -o vsense -g vsense /var/cache/vsense

# virtualenv that sees the distribution's SPI/GPIO modules; vsense from wheels
pi_python_env "$PREFIX/venv" "$SRC"

# config: never overwrite an edited one
FRESH_TOML=0
if [ ! -e /etc/vsense/edge.toml ]; then
  run install -m 0640 -o root -g vsense "$SRC/deploy/edge.toml" /etc/vsense/edge.toml
  FRESH_TOML=1
else
  echo "# keeping existing /etc/vsense/edge.toml"
fi
if [ ! -e /etc/vsense/env ]; then
  run install -m 0640 -o root -g vsense /dev/null /etc/vsense/env
fi

# local broker with access control (deploy/mosquitto.sh; docs/deploy.md "Access control")
mosquitto_setup() {
  local toml=/etc/vsense/edge.toml dev
  [ -e "$toml" ] || toml="$SRC/deploy/edge.toml"
  dev="$(sed -n 's/^id *= *"\([^"]*\)".*/\1/p' "$toml" | head -n 1)"
  # shellcheck source=deploy/mosquitto.sh
  . "$SRC/deploy/mosquitto.sh"
  local args=(--device "$dev" --owner root:mosquitto "${MQ_ARGS[@]+"${MQ_ARGS[@]}"}")
  [ "$DRY" -eq 1 ] && args+=(--dry-run)
  vsense_mosquitto_args "${args[@]}"
  vsense_mosquitto_config
  # the daemon's [mqtt]: its credentials, and TLS to the local broker with the CA
  local edits=(-e "s|^username = \"\"|username = \"$dev\"|"
               -e 's|^password_env = ""|password_env = "VSENSE_MQTT_PASSWORD"|')
  local want="username = \"$dev\", password_env = \"VSENSE_MQTT_PASSWORD\""
  if [ "$MQ_INSECURE" -eq 0 ]; then
    edits+=(-e "s|^port = 1883|port = $MQ_TLS_PORT|" -e 's|^tls = false|tls = true|'
            -e "s|^ca_file = \"\"|ca_file = \"$MQ_CA_FILE\"|")
    want="$want, port = $MQ_TLS_PORT, tls = true, ca_file = \"$MQ_CA_FILE\""
  fi
  if [ "$FRESH_TOML" -eq 1 ]; then  # a config we just installed: use the credentials
    run sed -i "${edits[@]}" /etc/vsense/edge.toml
    echo "# /etc/vsense/edge.toml [mqtt]: $want (the password is in /etc/vsense/env)"
  else
    echo "# existing /etc/vsense/edge.toml: set [mqtt] $want"
    echo "#   (the password is in /etc/vsense/env)"
  fi
}
if [ "$MOSQ" -eq 1 ]; then
  mosquitto_setup
else
  echo "# --no-mosquitto: set [mqtt] host, port, tls, ca_file, username and password_env in"
  echo "#   /etc/vsense/edge.toml for your broker (docs/deploy.md \"Access control\")"
fi

# bundle signatures (deploy/signing.sh; docs/deploy.md "Signed bundles"): the daemon verifies
# with cryptography, from the distribution (the venv sees system packages)
if [ "$SIGN" -eq 1 ]; then
  run apt-get install -y python3-cryptography
  # shellcheck source=deploy/signing.sh
  . "$(dirname "$0")/signing.sh"
  vsense_signing_setup /etc/vsense "$PREFIX/venv/bin/python" /etc/vsense/edge.toml \
    "$FRESH_TOML" "$PUBKEY"
else
  echo "# --no-signature: the daemon runs any bundle placed in /var/lib/vsense (docs/deploy.md"
  echo "#   \"Signed bundles\": when that is acceptable)"
fi

# SPI must be enabled (raspi-config nonint do_spi 0 = enable)
if command -v raspi-config >/dev/null 2>&1; then
  run raspi-config nonint do_spi 0
fi

# unit
run install -m 0644 "$SRC/systemd/vsense-edge.service" /etc/systemd/system/vsense-edge.service
live systemctl daemon-reload
[ "$MOSQ" -eq 1 ] && run systemctl enable mosquitto && live systemctl restart mosquitto
run systemctl enable vsense-edge.service
if [ -e /var/lib/vsense/bundle.npz ] && [ "$START" -eq 1 ]; then
  live systemctl restart vsense-edge.service
else
  echo "# no /var/lib/vsense/bundle.npz yet: copy one there with its bundle.npz.sig"
  echo "#   (docs/daemon.md), then"
  echo "#   sudo systemctl start vsense-edge"
fi
echo "# done"
