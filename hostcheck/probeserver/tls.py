"""TLS for the probe server: the user's certificate, or a self-signed one to pin.

A self-signed certificate is made once and kept in a state directory (0700, key 0600), so its
SHA-256 fingerprint stays the same across restarts and the client can pin it with
``--probe-fingerprint``. A key, or the state directory, that group or others may read or
change is refused (:mod:`hostcheck.netprobe.private_files`). Only the server imports this
module (it needs ``cryptography``).
"""

from __future__ import annotations

import datetime
import hashlib
import os
import ssl
from pathlib import Path

from hostcheck.netprobe.private_files import check_private

CERT_NAME = "probe-server.crt"
KEY_NAME = "probe-server.key"
VALID_DAYS = 3650


def fingerprint_of_der(der: bytes) -> str:
    """``SHA256:AB:CD:...``: the form the server prints and the client accepts."""
    digest = hashlib.sha256(der).hexdigest().upper()
    return "SHA256:" + ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def fingerprint_of_pem_file(path: Path) -> str:
    return fingerprint_of_der(ssl.PEM_cert_to_DER_cert(path.read_text(encoding="ascii")))


def ensure_self_signed(state_dir: Path) -> tuple[Path, Path]:
    """The (cert, key) paths in ``state_dir``, creating a self-signed pair on first use."""
    cert, key = state_dir / CERT_NAME, state_dir / KEY_NAME
    if state_dir.exists():
        check_private(state_dir, state_dir.stat(), directory=True)
    if cert.is_file() and key.is_file():
        return cert, key
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    check_private(state_dir, state_dir.stat(), directory=True)
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hostcheck probe server")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .sign(private, hashes.SHA256())
    )
    key_bytes = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    # O_EXCL + 0600: the key is never readable by others, not even for a moment, and a
    # planted symlink is not followed.
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key_bytes)
    fd = os.open(cert, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(certificate.public_bytes(serialization.Encoding.PEM))
    return cert, key


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """The server's TLS context; PrivateFileError when ``key`` is open to others."""
    check_private(key, key.stat())
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert), str(key))
    return ctx
