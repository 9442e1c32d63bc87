#!/usr/bin/env bash
# Mosquitto with access control for vsense (called by deploy/install.sh --with-mosquitto;
# also usable alone, e.g. by the tests with a private --conf-dir):
#
#   deploy/mosquitto.sh --device ID [--conf-dir /etc/mosquitto] [--env-file /etc/vsense/env]
#       [--secrets-dir /etc/vsense] [--port 1883] [--ws-port 9001] [--bind ADDR]
#       [--tls-cert FILE --tls-key FILE [--tls-port 8883]] [--dry-run]
#
# Writes <conf-dir>/conf.d/vsense.conf (listeners: MQTT on --port, MQTT over WebSockets on
# --ws-port for the browser dashboard, optional TLS on --tls-port; no anonymous access),
# <conf-dir>/vsense.passwd (hashed, mosquitto_passwd) and <conf-dir>/vsense.acl with three
# roles (docs/deploy.md "Access control"):
#   * device  (user = device id, client id forced to it): publishes only its own
#     vsense/<id>/{status,meta,estimates,health,params,cmd/reply}, reads its own cmd;
#   * operator: reads vsense/#, the only role that may publish vsense/+/cmd;
#   * viewer:   reads vsense/# (dashboards), publishes nothing.
# Passwords are random (32 bytes, base64); existing users keep theirs (idempotent). The
# device password goes to --env-file as VSENSE_MQTT_PASSWORD (the daemon reads it through
# [mqtt] password_env); operator and viewer passwords to <secrets-dir>/mqtt-<role>.secret
# (mode 0600). Nothing secret is printed.
set -euo pipefail

MQ_DEVICE=""; MQ_CONF_DIR=/etc/mosquitto; MQ_ENV_FILE=/etc/vsense/env; MQ_SECRETS_DIR=/etc/vsense
MQ_PORT=1883; MQ_WS_PORT=9001; MQ_BIND=""; MQ_TLS_CERT=""; MQ_TLS_KEY=""; MQ_TLS_PORT=8883; MQ_DRY=0
MQ_OWNER=""  # user:group of the password/ACL files (mosquitto must read them)

vsense_mosquitto_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --device) MQ_DEVICE="$2"; shift ;;
      --conf-dir) MQ_CONF_DIR="$2"; shift ;;
      --env-file) MQ_ENV_FILE="$2"; shift ;;
      --secrets-dir) MQ_SECRETS_DIR="$2"; shift ;;
      --port) MQ_PORT="$2"; shift ;;
      --ws-port) MQ_WS_PORT="$2"; shift ;;
      --bind) MQ_BIND="$2"; shift ;;
      --tls-cert) MQ_TLS_CERT="$2"; shift ;;
      --tls-key) MQ_TLS_KEY="$2"; shift ;;
      --tls-port) MQ_TLS_PORT="$2"; shift ;;
      --owner) MQ_OWNER="$2"; shift ;;
      --dry-run) MQ_DRY=1 ;;
      -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
      *) echo "mosquitto.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
  done
  if ! [[ "$MQ_DEVICE" =~ ^[A-Za-z0-9_.-]{1,64}$ ]] || [ "$MQ_DEVICE" = operator ] || [ "$MQ_DEVICE" = viewer ]; then
    echo "mosquitto.sh: --device must be the [device] id (letters, digits, _ . -; not operator/viewer), got '$MQ_DEVICE'" >&2
    exit 2
  fi
  if [ -n "$MQ_TLS_CERT" ] && [ -z "$MQ_TLS_KEY" ]; then
    echo "mosquitto.sh: --tls-cert needs --tls-key" >&2; exit 2
  fi
}

_mq_run() { echo "+ $*"; if [ "$MQ_DRY" -eq 0 ]; then "$@"; fi; }

_mq_secret() { head -c 32 /dev/urandom | base64 | tr -d '\n/+=' ; }

# add a user with a new random password unless it exists; echo the password if created
_mq_user() {  # file user
  local f="$1" u="$2" pw
  if [ -f "$f" ] && grep -q "^$u:" "$f"; then return 0; fi
  pw="$(_mq_secret)"
  if [ -f "$f" ]; then mosquitto_passwd -b "$f" "$u" "$pw" >&2; else mosquitto_passwd -c -b "$f" "$u" "$pw" >&2; fi
  echo "$pw"
}

vsense_mosquitto_config() {
  local conf="$MQ_CONF_DIR/conf.d/vsense.conf" acl="$MQ_CONF_DIR/vsense.acl" pwf="$MQ_CONF_DIR/vsense.passwd"
  echo "# mosquitto: listeners ${MQ_BIND:-*}:$MQ_PORT (mqtt), *:$MQ_WS_PORT (websockets)${MQ_TLS_CERT:+, ${MQ_BIND:-*}:$MQ_TLS_PORT (mqtt+TLS)}; users $MQ_DEVICE, operator, viewer; ACL $acl"
  if [ "$MQ_DRY" -eq 1 ]; then
    echo "+ write $conf, $acl; mosquitto_passwd $pwf ($MQ_DEVICE, operator, viewer)"
    echo "+ VSENSE_MQTT_PASSWORD -> $MQ_ENV_FILE; operator/viewer -> $MQ_SECRETS_DIR/mqtt-*.secret"
    return 0
  fi
  command -v mosquitto_passwd >/dev/null || { echo "mosquitto.sh: mosquitto_passwd not found (apt-get install mosquitto)" >&2; exit 1; }
  install -d -m 0755 "$MQ_CONF_DIR/conf.d"
  install -d -m 0750 "$MQ_SECRETS_DIR"
  umask 077
  local pw
  pw="$(_mq_user "$pwf" "$MQ_DEVICE")"
  if [ -n "$pw" ]; then
    touch "$MQ_ENV_FILE"
    grep -v '^VSENSE_MQTT_PASSWORD=' "$MQ_ENV_FILE" > "$MQ_ENV_FILE.tmp" || true
    echo "VSENSE_MQTT_PASSWORD=$pw" >> "$MQ_ENV_FILE.tmp"
    mv "$MQ_ENV_FILE.tmp" "$MQ_ENV_FILE"
  fi
  for role in operator viewer; do
    pw="$(_mq_user "$pwf" "$role")"
    if [ -n "$pw" ]; then printf '%s\n' "$pw" > "$MQ_SECRETS_DIR/mqtt-$role.secret"; fi
  done
  cat > "$acl" <<EOF
# vsense roles (deploy/mosquitto.sh; docs/deploy.md "Access control")
# devices: user name = device id (= client id, use_username_as_clientid)
pattern write vsense/%u/status
pattern write vsense/%u/meta
pattern write vsense/%u/estimates
pattern write vsense/%u/health
pattern write vsense/%u/params
pattern write vsense/%u/cmd/reply
pattern read vsense/%u/cmd

user operator
topic read vsense/#
topic write vsense/+/cmd

user viewer
topic read vsense/#
EOF
  {
    echo "# vsense (deploy/mosquitto.sh): no anonymous access, per-device credentials, ACL"
    echo "per_listener_settings false"
    echo "allow_anonymous false"
    echo "password_file $pwf"
    echo "acl_file $acl"
    echo "# use_username_as_clientid (per listener): a client cannot take over a device's"
    echo "# session with another user's credentials"
    echo "listener $MQ_PORT $MQ_BIND"
    echo "protocol mqtt"
    echo "use_username_as_clientid true"
    echo "# MQTT over WebSockets for browser dashboards (mosquitto 2.0.x binds it to all"
    echo "# interfaces whatever the address; firewall it if the LAN is not trusted). Client"
    echo "# ids are free here (several dashboard tabs per user); see docs/deploy.md."
    echo "listener $MQ_WS_PORT"
    echo "protocol websockets"
    if [ -n "$MQ_TLS_CERT" ]; then
      echo "listener $MQ_TLS_PORT $MQ_BIND"
      echo "protocol mqtt"
      echo "use_username_as_clientid true"
      echo "certfile $MQ_TLS_CERT"
      echo "keyfile $MQ_TLS_KEY"
      echo "tls_version tlsv1.2"
    fi
  } > "$conf"
  chmod 0644 "$conf" "$acl"
  chmod 0640 "$pwf"
  if [ -n "$MQ_OWNER" ]; then chown "$MQ_OWNER" "$pwf" "$acl"; fi
  umask 022
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  vsense_mosquitto_args "$@"
  vsense_mosquitto_config
fi
