"""Test helpers for auth: throwaway keys (generated per run, never committed) and tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from functools import lru_cache
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jose import jwk, jwt

HS_SECRET = "test-shared-secret-" + "x" * 24
ISSUER = "https://issuer.test"
AUDIENCE = "graphkeep-test"


@lru_cache(maxsize=4)
def rsa_keypair(label: str = "a") -> tuple[str, str]:
    """(private PEM, public PEM), RSA 2048; cached per label for speed."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return _pems(key)


@lru_cache(maxsize=4)
def ec_keypair(label: str = "a") -> tuple[str, str]:
    """(private PEM, public PEM) on P-256 (ES256)."""
    key = ec.generate_private_key(ec.SECP256R1())
    return _pems(key)


def _pems(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> tuple[str, str]:
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


def public_jwk(public_pem: str, alg: str, kid: str) -> dict[str, Any]:
    """The public key as a JWK with `kid` and `alg`."""
    entry = dict(jwk.construct(public_pem, alg).to_dict())
    entry.update(kid=kid, alg=alg, use="sig")
    return entry


def claims(
    tenant: object = "acme", sub: str | None = "alice", ttl: int = 300, **extra: Any
) -> dict[str, Any]:
    """Valid claims for the test issuer and audience; `extra` overrides or adds."""
    now = int(time.time())
    out: dict[str, Any] = {
        "sub": sub,
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now,
        "nbf": now,
        "exp": now + ttl,
    }
    if tenant is not None:
        out["tenant_id"] = tenant
    out.update(extra)
    return {k: v for k, v in out.items() if v is not None}


def hs_token(payload: dict[str, Any], secret: str = HS_SECRET) -> str:
    return str(jwt.encode(payload, secret, algorithm="HS256"))


def signed_token(
    payload: dict[str, Any], private_pem: str, alg: str, kid: str | None = None
) -> str:
    headers = {"kid": kid} if kid else None
    return str(jwt.encode(payload, private_pem, algorithm=alg, headers=headers))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned_token(payload: dict[str, Any]) -> str:
    """An `alg: none` token (jose refuses to make one, so it is assembled by hand)."""
    header = _b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return f"{header}.{_b64(json.dumps(payload).encode())}."


def hmac_forged_token(payload: dict[str, Any], secret: bytes) -> str:
    """HS256 signed with arbitrary bytes, e.g. an RSA public key (algorithm confusion)."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps(payload).encode())
    sig = hmac.new(secret, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(sig)}"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
