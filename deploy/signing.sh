# Bundle signatures on the device; sourced by deploy/install.sh, which defines run() (print, and
# execute unless --dry-run) and DRY.
#
#   vsense_signing_setup ETC PYTHON TOML FRESH [PUBLIC_KEY]
#
# Makes ETC/signing.pub the key the daemon trusts: PUBLIC_KEY when given (the workstation's
# `python -m edge.signing keygen` key: the private key never was on the device), else a new
# Ed25519 pair made here with PYTHON -m edge.signing keygen (ETC/signing.key, mode 0600, root
# only: move it to the workstation that builds the bundles and delete it here). An existing
# ETC/signing.pub is kept (idempotent). With FRESH=1 (a config the installer just wrote) it
# turns on `[bundle] public_key = "ETC/signing.pub"` and `require_signature = true` in TOML: the
# daemon then starts only on a bundle whose <bundle>.sig verifies (docs/deploy.md "Signed
# bundles"); with FRESH=0 it prints the two lines to set.

vsense_signing_setup() {
  local etc="$1" py="$2" toml="$3" fresh="$4" pub_in="${5:-}"
  local key="$etc/signing.key" pub="$etc/signing.pub"
  if [ -e "$pub" ]; then
    echo "# keeping the trusted bundle-signing key $pub"
  elif [ -n "$pub_in" ]; then
    run install -m 0644 "$pub_in" "$pub"
  else
    run "$py" -m edge.signing keygen "$key"
    run mv "$key.pub" "$pub"
    run chmod 0644 "$pub"
    echo "# NEW bundle-signing key: $key (private). Copy it to the workstation that builds"
    echo "#   the bundles, then delete it here (shred -u $key); sign each bundle there with"
    echo "#   python -m edge.signing sign bundle.npz signing.key   (writes bundle.npz.sig)"
  fi
  local lines="public_key = \"$pub\"\\nrequire_signature = true"
  if [ "$fresh" -eq 1 ]; then
    run sed -i "/^\[bundle\]/a $lines" "$toml"
    echo "# $toml [bundle]: public_key = \"$pub\", require_signature = true (the daemon"
    echo "#   starts only on a bundle whose <bundle>.sig verifies with it)"
  else
    echo "# existing $toml: set [bundle] public_key = \"$pub\" and require_signature = true"
  fi
}
