"""Ed25519 signatures of bundles: the device applies model updates only to a bundle signed
by a key it trusts (``[bundle] public_key``, ``require_signature``).

The signature covers the bundle's ``content_hash`` (sha256 over every array, checked by
:meth:`edge.bundle.Bundle.load`), prefixed by a context string, so any change to any array
invalidates it. It lives next to the bundle in ``<bundle>.sig`` (hex, one line).

Needs the ``sign`` extra (``pip install vsense[sign]``: the ``cryptography`` package)::

    python -m edge.signing keygen KEY            # KEY (private, PEM) and KEY.pub
    python -m edge.signing sign BUNDLE KEY       # writes BUNDLE.sig
    python -m edge.signing verify BUNDLE KEY.pub # exit 0 when it verifies
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from edge.bundle import Bundle, BundleError

CONTEXT = b"vsense-bundle-v1:"


class SignatureError(ValueError):
    """The signature is missing, malformed or does not verify; the message names the file."""


def _crypto():
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise SignatureError("bundle signatures need the 'sign' extra: "
                             "pip install 'vsense[sign]' (package cryptography)") from None
    return serialization, ed25519


def signature_path(bundle_path) -> Path:
    return Path(str(bundle_path) + ".sig")


def message(content_hash: str) -> bytes:
    return CONTEXT + content_hash.encode("ascii")


def keygen(path) -> tuple[Path, Path]:
    """Write a new private key (PEM, mode 0600) and ``<path>.pub`` (PEM)."""
    serialization, ed25519 = _crypto()
    key = ed25519.Ed25519PrivateKey.generate()
    path = Path(path)
    priv = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(priv)
    pub = Path(str(path) + ".pub")
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    return path, pub


def sign_bundle(bundle_path, key_path) -> Path:
    """Sign the bundle's content hash with the private key; writes ``<bundle>.sig``."""
    serialization, ed25519 = _crypto()
    b = Bundle.load(bundle_path)
    try:
        key = serialization.load_pem_private_key(Path(key_path).read_bytes(), None)
    except (OSError, ValueError, TypeError) as e:
        raise SignatureError(f"{key_path}: not a readable private key ({e})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SignatureError(f"{key_path}: not an Ed25519 private key")
    sig = key.sign(message(b.content_hash))
    out = signature_path(bundle_path)
    out.write_text(sig.hex() + "\n")
    return out


def load_public_key(path):
    serialization, ed25519 = _crypto()
    try:
        key = serialization.load_pem_public_key(Path(path).read_bytes())
    except (OSError, ValueError) as e:
        raise SignatureError(f"{path}: not a readable public key ({e})") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise SignatureError(f"{path}: not an Ed25519 public key")
    return key


def verify(bundle_path, content_hash: str, public_key_path) -> None:
    """Raise :class:`SignatureError` unless ``<bundle>.sig`` is a valid signature of
    ``content_hash`` by the key in ``public_key_path``."""
    from cryptography.exceptions import InvalidSignature

    key = load_public_key(public_key_path)
    sp = signature_path(bundle_path)
    try:
        text = sp.read_text(encoding="ascii", errors="strict").strip()
        sig = bytes.fromhex(text)
    except FileNotFoundError:
        raise SignatureError(f"{sp}: no signature file for bundle {bundle_path}") from None
    except (OSError, ValueError) as e:
        raise SignatureError(f"{sp}: not a hex signature ({e})") from None
    if len(sig) != 64:
        raise SignatureError(f"{sp}: an Ed25519 signature has 64 bytes, got {len(sig)}")
    try:
        key.verify(sig, message(content_hash))
    except InvalidSignature:
        raise SignatureError(f"{sp}: signature does not verify with {public_key_path} "
                             f"(bundle content hash {content_hash[:12]}...)") from None


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m edge.signing", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("keygen")
    k.add_argument("key")
    s = sub.add_parser("sign")
    s.add_argument("bundle")
    s.add_argument("key")
    v = sub.add_parser("verify")
    v.add_argument("bundle")
    v.add_argument("public_key")
    a = p.parse_args(argv)

    try:
        if a.cmd == "keygen":
            priv, pub = keygen(a.key)
            print(f"wrote {priv} (keep secret) and {pub} (copy to the devices)")
        elif a.cmd == "sign":
            print(f"wrote {sign_bundle(a.bundle, a.key)}")
        else:
            verify(a.bundle, Bundle.load(a.bundle).content_hash, a.public_key)
            print(f"{a.bundle}: signature ok")
    except (SignatureError, BundleError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
