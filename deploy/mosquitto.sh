#!/usr/bin/env bash
# Mosquitto with access control and TLS for vsense (called by deploy/install.sh; also usable
# alone, e.g. by the tests with a private --conf-dir):
#
#   deploy/mosquitto.sh --device ID [--conf-dir /etc/mosquitto] [--env-file /etc/vsense/env]
#       [--secrets-dir /etc/vsense] [--listen ADDR]... [--port 1883] [--tls-port 8883]
#       [--tls-dir <conf-dir>/certs] [--ca-cert FILE --ca-key FILE]
#       [--tls-cert FILE --tls-key FILE --ca-file FILE] [--tls-name NAME]...
#       [--websockets [--ws-port 9001]] [--insecure] [--owner USER:GROUP] [--dry-run]
#
# Listeners: MQTT on --port bound to 127.0.0.1 only (local tools; the password never leaves
# the machine), MQTT over TLS on --tls-port bound to 127.0.0.1 and every --listen address
# (none given: this machine only), and with --websockets MQTT over secure WebSockets on
# --ws-port (mosquitto 2.0.11, Raspberry Pi OS bookworm, binds it to every interface whatever
# the address: eclipse-mosquitto/mosquitto#3045). No anonymous access on any listener.
# TLS: by default a CA created here with openssl (<tls-dir>/vsense-ca.key stays on this
# machine, mode 0600; <tls-dir>/vsense-ca.crt is what clients verify the broker with) signs a
# server certificate for localhost, 127.0.0.1, this host name, every --listen address and
# every --tls-name (made again when that list changes); --ca-cert/--ca-key sign it with your
# CA instead; --tls-cert/--tls-key use your
# server certificate as it is (--ca-file: the CA clients verify it with). --insecure: no TLS,
# the --port listener on 127.0.0.1 and every --listen address (credentials and ACL stay).
# Writes <conf-dir>/conf.d/vsense.conf, <conf-dir>/vsense.passwd (hashed, mosquitto_passwd)
# and <conf-dir>/vsense.acl with three roles (docs/deploy.md "Access control"):
#   * device  (user = device id, client id forced to it): publishes only its own
#     vsense/<id>/{status,meta,estimates,raw,health,params,cmd/reply}, reads its own cmd;
#   * operator: reads vsense/#, the only role that may publish vsense/+/cmd;
#   * viewer:   reads vsense/# (dashboards), publishes nothing.
# Passwords are random (32 bytes, base64); existing users keep theirs (idempotent). The
# device password goes to --env-file as VSENSE_MQTT_PASSWORD (the daemon reads it through
# [mqtt] password_env); operator and viewer passwords to <secrets-dir>/mqtt-<role>.secret
# (mode 0600). Nothing secret is printed. --dry-run prints the files it would write.
set -euo pipefail

MQ_DEVICE=""; MQ_CONF_DIR=/etc/mosquitto; MQ_ENV_FILE=/etc/vsense/env; MQ_SECRETS_DIR=/etc/vsense
MQ_PORT=1883; MQ_WS_PORT=9001; MQ_TLS_PORT=8883; MQ_TLS_DIR=""
MQ_LISTEN=(); MQ_NAMES=(); MQ_WS=0; MQ_INSECURE=0; MQ_DRY=0
MQ_CA_CERT=""; MQ_CA_KEY=""; MQ_TLS_CERT=""; MQ_TLS_KEY=""; MQ_CA_FILE=""
MQ_OWNER=""  # user:group of the password/ACL/server key files (mosquitto must read them)

vsense_mosquitto_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --device) MQ_DEVICE="$2"; shift ;;
      --conf-dir) MQ_CONF_DIR="$2"; shift ;;
      --env-file) MQ_ENV_FILE="$2"; shift ;;
      --secrets-dir) MQ_SECRETS_DIR="$2"; shift ;;
      --listen|--bind) MQ_LISTEN+=("$2"); shift ;;
      --port) MQ_PORT="$2"; shift ;;
      --tls-port) MQ_TLS_PORT="$2"; shift ;;
      --tls-dir) MQ_TLS_DIR="$2"; shift ;;
      --tls-name) MQ_NAMES+=("$2"); shift ;;
      --ca-cert) MQ_CA_CERT="$2"; shift ;;
      --ca-key) MQ_CA_KEY="$2"; shift ;;
      --tls-cert) MQ_TLS_CERT="$2"; shift ;;
      --tls-key) MQ_TLS_KEY="$2"; shift ;;
      --ca-file) MQ_CA_FILE="$2"; shift ;;
      --websockets) MQ_WS=1 ;;
      --ws-port) MQ_WS_PORT="$2"; shift ;;
      --insecure) MQ_INSECURE=1 ;;
      --owner) MQ_OWNER="$2"; shift ;;
      --dry-run) MQ_DRY=1 ;;
      -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
      *) echo "mosquitto.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
  done
  if ! [[ "$MQ_DEVICE" =~ ^[A-Za-z0-9_.-]{1,64}$ ]] || [ "$MQ_DEVICE" = operator ] || [ "$MQ_DEVICE" = viewer ]; then
    echo "mosquitto.sh: --device must be the [device] id (letters, digits, _ . -; not operator/viewer), got '$MQ_DEVICE'" >&2
    exit 2
  fi
  local a
  for a in "${MQ_LISTEN[@]+"${MQ_LISTEN[@]}"}"; do
    if ! [[ "$a" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ || "$a" =~ ^[0-9A-Fa-f:]*:[0-9A-Fa-f:.]*$ ]]; then
      echo "mosquitto.sh: --listen takes an IP address of this machine (e.g. 192.168.1.20), got '$a'" >&2
      exit 2
    fi
  done
  for a in MQ_PORT MQ_TLS_PORT MQ_WS_PORT; do
    if ! [[ "${!a}" =~ ^[0-9]{1,5}$ ]] || [ "${!a}" -lt 1 ] || [ "${!a}" -gt 65535 ]; then
      echo "mosquitto.sh: port ${!a} is not a TCP port (1..65535)" >&2; exit 2
    fi
  done
  if [ -n "$MQ_TLS_CERT$MQ_TLS_KEY" ] && { [ -z "$MQ_TLS_CERT" ] || [ -z "$MQ_TLS_KEY" ]; }; then
    echo "mosquitto.sh: --tls-cert and --tls-key go together" >&2; exit 2
  fi
  if [ -n "$MQ_CA_CERT$MQ_CA_KEY" ] && { [ -z "$MQ_CA_CERT" ] || [ -z "$MQ_CA_KEY" ]; }; then
    echo "mosquitto.sh: --ca-cert and --ca-key go together" >&2; exit 2
  fi
  if [ -n "$MQ_TLS_CERT" ] && [ -n "$MQ_CA_CERT" ]; then
    echo "mosquitto.sh: give either your server certificate (--tls-cert) or your CA (--ca-cert)" >&2; exit 2
  fi
  if [ "$MQ_INSECURE" -eq 1 ] && [ -n "$MQ_TLS_CERT$MQ_CA_CERT" ]; then
    echo "mosquitto.sh: --insecure turns TLS off; drop it to use the certificates" >&2; exit 2
  fi
  MQ_TLS_DIR="${MQ_TLS_DIR:-$MQ_CONF_DIR/certs}"  # the mosquitto user reads it there
  if [ "$MQ_INSECURE" -eq 0 ]; then  # the files the broker and the clients use
    if [ -z "$MQ_TLS_CERT" ]; then
      MQ_TLS_CERT="$MQ_TLS_DIR/vsense-server.crt"; MQ_TLS_KEY="$MQ_TLS_DIR/vsense-server.key"
      MQ_CA_FILE="${MQ_CA_CERT:-$MQ_TLS_DIR/vsense-ca.crt}"
    elif [ -z "$MQ_CA_FILE" ]; then
      echo "mosquitto.sh: --tls-cert needs --ca-file (the CA clients verify it with)" >&2; exit 2
    fi
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

# the addresses of the network listeners: 127.0.0.1 and every --listen address, once each
_mq_addresses() {
  local a seen=" 127.0.0.1 "
  echo 127.0.0.1
  for a in "${MQ_LISTEN[@]+"${MQ_LISTEN[@]}"}"; do
    case "$seen" in *" $a "*) continue ;; esac
    seen="$seen$a "; echo "$a"
  done
}

vsense_mosquitto_acl() {
  cat <<EOF
# vsense roles (deploy/mosquitto.sh; docs/deploy.md "Access control")
# devices: user name = device id (= client id, use_username_as_clientid)
pattern write vsense/%u/status
pattern write vsense/%u/meta
pattern write vsense/%u/estimates
pattern write vsense/%u/raw
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
}

_mq_tls_lines() {
  echo "certfile $MQ_TLS_CERT"
  echo "keyfile $MQ_TLS_KEY"
  echo "tls_version tlsv1.2"
}

vsense_mosquitto_conf() {
  local a
  echo "# vsense (deploy/mosquitto.sh): no anonymous access, per-device credentials, ACL,"
  echo "# listeners only on the addresses named at installation (--listen)"
  echo "per_listener_settings false"
  echo "allow_anonymous false"
  echo "password_file $MQ_CONF_DIR/vsense.passwd"
  echo "acl_file $MQ_CONF_DIR/vsense.acl"
  echo "# use_username_as_clientid (per listener): a client cannot take over a device's"
  echo "# session with another user's credentials"
  if [ "$MQ_INSECURE" -eq 1 ]; then
    echo "# --insecure: no TLS (passwords cross the network in clear on the --listen addresses)"
    while read -r a; do
      echo "listener $MQ_PORT $a"; echo "protocol mqtt"; echo "use_username_as_clientid true"
    done < <(_mq_addresses)
  else
    echo "# plain MQTT for local clients only"
    echo "listener $MQ_PORT 127.0.0.1"; echo "protocol mqtt"; echo "use_username_as_clientid true"
    echo "# MQTT over TLS (CA: $MQ_CA_FILE)"
    while read -r a; do
      echo "listener $MQ_TLS_PORT $a"; echo "protocol mqtt"; echo "use_username_as_clientid true"
      _mq_tls_lines
    done < <(_mq_addresses)
  fi
  if [ "$MQ_WS" -eq 1 ]; then
    echo "# MQTT over WebSockets for browser dashboards; mosquitto 2.0.11 binds it to every"
    echo "# interface whatever the address (eclipse-mosquitto/mosquitto#3045): firewall it"
    echo "# where the LAN is not trusted. Client ids are free here (several dashboard tabs)."
    echo "listener $MQ_WS_PORT 127.0.0.1"
    echo "protocol websockets"
    if [ "$MQ_INSECURE" -eq 0 ]; then _mq_tls_lines; fi
  fi
}

# subjectAltName of the server certificate: localhost, 127.0.0.1, this host, --listen, --tls-name
_mq_san() {
  local a san="DNS:localhost,IP:127.0.0.1" h
  h="$(hostname 2>/dev/null || true)"
  [ -n "$h" ] && [ "$h" != localhost ] && san="$san,DNS:$h"
  for a in "${MQ_LISTEN[@]+"${MQ_LISTEN[@]}"}"; do
    [ "$a" = 127.0.0.1 ] || san="$san,IP:$a"
  done
  for a in "${MQ_NAMES[@]+"${MQ_NAMES[@]}"}"; do san="$san,DNS:$a"; done
  echo "$san"
}

# the CA (unless the user's) and the broker's certificate signed by it, with openssl
vsense_mosquitto_tls() {
  [ "$MQ_INSECURE" -eq 0 ] && [ "$MQ_TLS_CERT" = "$MQ_TLS_DIR/vsense-server.crt" ] || return 0
  local ca_crt="${MQ_CA_CERT:-$MQ_TLS_DIR/vsense-ca.crt}"
  local ca_key="${MQ_CA_KEY:-$MQ_TLS_DIR/vsense-ca.key}" csr="$MQ_TLS_DIR/vsense-server.csr"
  local san; san="$(_mq_san)"
  if [ -z "$MQ_CA_CERT" ] && [ ! -e "$ca_crt" ]; then
    _mq_run openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -days 3650 -subj "/CN=vsense CA $(hostname 2>/dev/null || echo device)" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -keyout "$ca_key" -out "$ca_crt"
  fi
  # the server certificate: new, signed by the user's CA, or for another list of names
  if [ ! -e "$MQ_TLS_CERT" ] || [ -n "$MQ_CA_CERT" ] || \
      [ "$(cat "$MQ_TLS_DIR/vsense-server.san" 2>/dev/null)" != "$san" ]; then
    echo "# broker certificate for $san"
    _mq_run openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -subj "/CN=vsense broker" -keyout "$MQ_TLS_KEY" -out "$csr"
    _mq_run openssl x509 -req -in "$csr" -CA "$ca_crt" -CAkey "$ca_key" \
      -CAserial "$MQ_TLS_DIR/vsense-ca.srl" -CAcreateserial -days 825 -out "$MQ_TLS_CERT" \
      -extfile <(printf \
      'subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n' "$san")
    if [ "$MQ_DRY" -eq 0 ]; then rm -f "$csr"; echo "$san" > "$MQ_TLS_DIR/vsense-server.san"; fi
  fi
  if [ "$MQ_DRY" -eq 0 ]; then
    chmod 0600 "$ca_key" 2>/dev/null || true
    chmod 0644 "$ca_crt" "$MQ_TLS_CERT"
    chmod 0640 "$MQ_TLS_KEY"
    if [ -n "$MQ_OWNER" ]; then chown "$MQ_OWNER" "$MQ_TLS_KEY"; fi
  fi
}

vsense_mosquitto_config() {
  local conf="$MQ_CONF_DIR/conf.d/vsense.conf" acl="$MQ_CONF_DIR/vsense.acl" pwf="$MQ_CONF_DIR/vsense.passwd"
  local where; where="$(_mq_addresses | tr '\n' ' ')"
  if [ "$MQ_INSECURE" -eq 1 ]; then
    echo "# mosquitto: NO TLS (--insecure): mqtt on ${where}port $MQ_PORT; users $MQ_DEVICE, operator, viewer"
  else
    echo "# mosquitto: mqtt+TLS on ${where}port $MQ_TLS_PORT (CA $MQ_CA_FILE), mqtt on 127.0.0.1:$MQ_PORT; users $MQ_DEVICE, operator, viewer"
  fi
  if [ "$MQ_DRY" -eq 1 ]; then
    [ "$MQ_INSECURE" -eq 1 ] || { _mq_run install -d -m 0755 "$MQ_TLS_DIR"; vsense_mosquitto_tls; }
    echo "+ write $conf:"; vsense_mosquitto_conf | sed 's/^/|   /'
    echo "+ write $acl:"; vsense_mosquitto_acl | sed 's/^/|   /'
    echo "+ mosquitto_passwd $pwf ($MQ_DEVICE, operator, viewer)"
    echo "+ VSENSE_MQTT_PASSWORD -> $MQ_ENV_FILE; operator/viewer -> $MQ_SECRETS_DIR/mqtt-*.secret"
    return 0
  fi
  command -v mosquitto_passwd >/dev/null || { echo "mosquitto.sh: mosquitto_passwd not found (apt-get install mosquitto)" >&2; exit 1; }
  if [ "$MQ_INSECURE" -eq 0 ]; then
    command -v openssl >/dev/null || { echo "mosquitto.sh: openssl not found (apt-get install openssl), or --insecure" >&2; exit 1; }
    install -d -m 0755 "$MQ_TLS_DIR"
    vsense_mosquitto_tls
  fi
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
  vsense_mosquitto_acl > "$acl"
  vsense_mosquitto_conf > "$conf"
  chmod 0644 "$conf" "$acl"
  chmod 0640 "$pwf"
  if [ -n "$MQ_OWNER" ]; then chown "$MQ_OWNER" "$pwf" "$acl"; fi
  umask 022
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  vsense_mosquitto_args "$@"
  vsense_mosquitto_config
fi
