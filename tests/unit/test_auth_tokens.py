"""JWTVerifier: every bad token is Unauthorized with the same message; good ones map claims."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from app.auth.tokens import INVALID_TOKEN, AuthConfigError, JWTVerifier, is_read_only
from app.errors import Unauthorized
from tests.authkit import (
    AUDIENCE,
    HS_SECRET,
    ISSUER,
    claims,
    ec_keypair,
    hmac_forged_token,
    hs_token,
    public_jwk,
    rsa_keypair,
    signed_token,
    unsigned_token,
)


def hs_verifier(**kw: object) -> JWTVerifier:
    args: dict[str, object] = {
        "algorithms": ["HS256"],
        "secret": HS_SECRET,
        "issuer": ISSUER,
        "audience": AUDIENCE,
        "leeway_seconds": 5,
    }
    args.update(kw)
    return JWTVerifier.from_config(**args)  # type: ignore[arg-type]


def rejected(verifier: JWTVerifier, token: str) -> None:
    with pytest.raises(Unauthorized) as info:
        verifier.verify(token)
    assert info.value.detail == INVALID_TOKEN
    assert token not in str(info.value)


def test_valid_hs256_token_maps_claims() -> None:
    p = hs_verifier().verify(hs_token(claims(tenant="acme", sub="alice", scope="read write")))
    assert (p.tenant_id, p.user_id, p.kind, p.read_only) == ("acme", "alice", "jwt", False)
    assert p.scopes == {"read", "write"}


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(claims(exp=int(time.time()) - 60), id="expired"),
        pytest.param(claims(nbf=int(time.time()) + 600), id="not-yet-valid"),
        pytest.param(claims(iss="https://evil.test"), id="wrong-issuer"),
        pytest.param(claims(aud="someone-else"), id="wrong-audience"),
        pytest.param(claims(iss=None), id="missing-issuer"),
        pytest.param(claims(aud=None), id="missing-audience"),
        pytest.param(claims(exp=None), id="missing-exp"),
        pytest.param(claims(tenant=None), id="missing-tenant"),
        pytest.param(claims(tenant=""), id="empty-tenant"),
        pytest.param(claims(tenant="*"), id="system-tenant"),
        pytest.param(claims(tenant=["acme"]), id="tenant-not-a-string"),
        pytest.param(claims(sub=None), id="missing-sub"),
        pytest.param(claims(tenant="t" * 256), id="tenant-too-long"),
        pytest.param(claims(sub="u" * 256), id="sub-too-long"),
    ],
)
def test_bad_claims_are_rejected(payload: dict[str, object]) -> None:
    rejected(hs_verifier(), hs_token(payload))


def test_leeway_accepts_small_clock_skew() -> None:
    just_expired = claims(exp=int(time.time()) - 2)
    assert hs_verifier(leeway_seconds=30).verify(hs_token(just_expired)).user_id == "alice"
    rejected(hs_verifier(leeway_seconds=0), hs_token(just_expired))


def test_bad_signature_and_garbage() -> None:
    v = hs_verifier()
    token = hs_token(claims())
    head, body, sig = token.split(".")
    rejected(v, hs_token(claims(), secret="another-secret-of-enough-length!!"))
    rejected(v, f"{head}.{body}.{sig[::-1]}")
    rejected(v, "not-a-jwt")
    rejected(v, "a.b.c")
    rejected(v, "x" * 20_000)


def test_alg_none_is_rejected() -> None:
    rejected(hs_verifier(), unsigned_token(claims()))


def test_rs256_public_key_as_hs256_secret_is_rejected(tmp_path: Path) -> None:
    """Algorithm confusion: the attacker signs HS256 with the server's public RSA key."""
    private_pem, public_pem = rsa_keypair()
    pem_file = tmp_path / "pub.pem"
    pem_file.write_text(public_pem)
    forged = hmac_forged_token(claims(), public_pem.encode())
    # RS256 only: HS256 is not an allowed algorithm
    rs_only = JWTVerifier.from_config(
        algorithms=["RS256"], public_key_file=pem_file, issuer=ISSUER, audience=AUDIENCE
    )
    rejected(rs_only, forged)
    assert rs_only.verify(signed_token(claims(), private_pem, "RS256")).tenant_id == "acme"
    # HS256 and RS256 together: an HS token is checked against the secret only, never the PEM
    mixed = JWTVerifier.from_config(
        algorithms=["HS256", "RS256"],
        secret=HS_SECRET,
        public_key_file=pem_file,
        issuer=ISSUER,
        audience=AUDIENCE,
    )
    rejected(mixed, forged)
    assert mixed.verify(hs_token(claims())).user_id == "alice"
    assert mixed.verify(signed_token(claims(), private_pem, "RS256")).user_id == "alice"


def test_algorithm_not_in_allowed_list(tmp_path: Path) -> None:
    private_pem, public_pem = rsa_keypair()
    pem_file = tmp_path / "pub.pem"
    pem_file.write_text(public_pem)
    v = JWTVerifier.from_config(
        algorithms=["RS256"], public_key_file=pem_file, issuer=ISSUER, audience=AUDIENCE
    )
    rejected(v, signed_token(claims(), private_pem, "RS512"))


def test_jwks_picks_key_by_kid(tmp_path: Path) -> None:
    rsa_private, rsa_public = rsa_keypair()
    ec_private, ec_public = ec_keypair()
    other_private, _ = rsa_keypair("other")
    jwks = tmp_path / "jwks.json"
    jwks.write_text(
        json.dumps(
            {
                "keys": [
                    public_jwk(rsa_public, "RS256", "rsa-1"),
                    public_jwk(ec_public, "ES256", "ec-1"),
                ]
            }
        )
    )
    v = JWTVerifier.from_config(
        algorithms=["RS256", "ES256"], jwks_file=jwks, issuer=ISSUER, audience=AUDIENCE
    )
    assert v.verify(signed_token(claims(sub="r"), rsa_private, "RS256", kid="rsa-1")).user_id == "r"
    assert v.verify(signed_token(claims(sub="e"), ec_private, "ES256", kid="ec-1")).user_id == "e"
    # a key not in the set, an unknown kid, and a kid naming a key of another type
    rejected(v, signed_token(claims(), other_private, "RS256", kid="rsa-1"))
    rejected(v, signed_token(claims(), rsa_private, "RS256", kid="rsa-2"))
    rejected(v, signed_token(claims(), rsa_private, "RS256", kid="ec-1"))


def test_configuration_errors(tmp_path: Path) -> None:
    with pytest.raises(AuthConfigError, match="SECRET"):
        JWTVerifier.from_config(algorithms=["HS256"])
    with pytest.raises(AuthConfigError, match="at least 32 bytes"):
        JWTVerifier.from_config(algorithms=["HS256"], secret="short-secret")
    with pytest.raises(AuthConfigError, match="PUBLIC_KEY_FILE"):
        JWTVerifier.from_config(algorithms=["RS256"])
    with pytest.raises(AuthConfigError, match="unsupported"):
        JWTVerifier.from_config(algorithms=["none"], secret=HS_SECRET)
    with pytest.raises(AuthConfigError, match="at least one"):
        JWTVerifier.from_config(algorithms=[], secret=HS_SECRET)
    private_jwks = tmp_path / "private.json"
    private_jwks.write_text(json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}))
    with pytest.raises(AuthConfigError, match="public keys only"):
        JWTVerifier.from_config(algorithms=["RS256"], jwks_file=private_jwks)
    not_jwks = tmp_path / "bad.json"
    not_jwks.write_text("[1, 2]")
    with pytest.raises(AuthConfigError, match="not a JWKS"):
        JWTVerifier.from_config(algorithms=["RS256"], jwks_file=not_jwks)


@pytest.mark.parametrize(
    ("scope", "read_only"),
    [
        (None, False),
        ("read", True),
        ("read write", False),
        (["read"], True),
        ("openid read", True),
        ("openid write", False),
        (["write", "read"], False),
    ],
)
def test_scopes_decide_read_only(scope: object, read_only: bool) -> None:
    payload = claims() if scope is None else claims(scope=scope)
    p = hs_verifier().verify(hs_token(payload))
    assert p.read_only is read_only
    assert is_read_only(p.scopes) is read_only


@pytest.mark.parametrize(
    "scope",
    [
        7,
        {"read": True},
        "READ",
        "read:all",
        "",
        " ",
        "openid profile",
        ["read", 7],
        [],
        "read\x00",
        ["write\ud800"],
        "read\twrite",
    ],
)
def test_unrecognised_or_malformed_scope_is_401_never_write(scope: object) -> None:
    # fail closed: a scope claim that is present but not understood grants nothing
    rejected(hs_verifier(), hs_token(claims(scope=scope)))


@pytest.mark.parametrize(
    "tenant",
    [
        "",
        " ",
        "\n",
        "acme\n",
        " acme",
        "acme ",
        "ac\x00me",
        "ac\ud800me",
        "a\tb",
        "x" * 256,
        "*",
        7,
        ["acme"],
        {"t": 1},
        True,
    ],
)
def test_malformed_tenant_claim_is_401(tenant: object) -> None:
    rejected(hs_verifier(), hs_token(claims(tenant=tenant)))


@pytest.mark.parametrize("sub", ["", "\ud800", "a\x00", "bob\r\n", 5])
def test_malformed_sub_claim_is_401(sub: object) -> None:
    rejected(hs_verifier(), hs_token(claims(sub=sub)))


def test_tenant_with_inner_space_and_unicode_is_accepted() -> None:
    p = hs_verifier().verify(hs_token(claims(tenant="Acme Corp é", sub="ålice")))
    assert (p.tenant_id, p.user_id) == ("Acme Corp é", "ålice")


def test_custom_tenant_claim() -> None:
    v = hs_verifier(tenant_claim="org")
    assert v.verify(hs_token(claims(tenant=None, org="globex"))).tenant_id == "globex"
    rejected(v, hs_token(claims(tenant="acme")))


def test_key_files_are_checked_at_start_up(tmp_path: Path) -> None:
    with pytest.raises(AuthConfigError, match="cannot read"):
        JWTVerifier.from_config(algorithms=["RS256"], public_key_file=tmp_path / "missing.pem")
    bad_pem = tmp_path / "bad.pem"
    bad_pem.write_text("-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n")
    with pytest.raises(AuthConfigError, match="no public key usable"):
        JWTVerifier.from_config(algorithms=["RS256"], public_key_file=bad_pem)
    _, ec_public = ec_keypair()
    rsa_private, rsa_public = rsa_keypair()
    only_ec = tmp_path / "ec.json"
    only_ec.write_text(json.dumps({"keys": [public_jwk(ec_public, "ES256", "ec-1")]}))
    with pytest.raises(AuthConfigError, match="no public key usable"):
        JWTVerifier.from_config(algorithms=["RS256"], jwks_file=only_ec)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(AuthConfigError, match="not valid JSON"):
        JWTVerifier.from_config(algorithms=["RS256"], jwks_file=broken)
    # an IdP set with an EC key while only RS256 is enabled: the EC key is simply not used
    mixed = tmp_path / "mixed.json"
    mixed.write_text(
        json.dumps(
            {
                "keys": [
                    public_jwk(ec_public, "ES256", "ec-1"),
                    public_jwk(rsa_public, "RS256", "rsa-1"),
                ]
            }
        )
    )
    v = JWTVerifier.from_config(
        algorithms=["RS256"], jwks_file=mixed, issuer=ISSUER, audience=AUDIENCE
    )
    assert v.verify(signed_token(claims(), rsa_private, "RS256", kid="rsa-1")).user_id == "alice"


def test_jwks_rotation_without_restart(tmp_path: Path) -> None:
    old_private, old_public = rsa_keypair()
    new_private, new_public = rsa_keypair("other")
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [public_jwk(old_public, "RS256", "old")]}))
    v = JWTVerifier.from_config(
        algorithms=["RS256"],
        jwks_file=jwks,
        issuer=ISSUER,
        audience=AUDIENCE,
        jwks_refresh_seconds=0,
    )
    new_token = signed_token(claims(sub="n"), new_private, "RS256", kid="new")
    rejected(v, new_token)
    # the issuer publishes the new key next to the old one
    jwks.write_text(
        json.dumps(
            {
                "keys": [
                    public_jwk(old_public, "RS256", "old"),
                    public_jwk(new_public, "RS256", "new"),
                ]
            }
        )
    )
    stat = jwks.stat()
    os.utime(jwks, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert v.verify(new_token).user_id == "n"
    assert v.verify(signed_token(claims(sub="o"), old_private, "RS256", kid="old")).user_id == "o"
    # a broken file keeps the keys that worked
    jwks.write_text("{broken")
    os.utime(jwks, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    rejected(v, signed_token(claims(), old_private, "RS256", kid="unknown"))
    assert v.verify(new_token).user_id == "n"


def test_jwks_refresh_is_rate_limited(tmp_path: Path) -> None:
    old_private, old_public = rsa_keypair()
    new_private, new_public = rsa_keypair("other")
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [public_jwk(old_public, "RS256", "old")]}))
    v = JWTVerifier.from_config(
        algorithms=["RS256"], jwks_file=jwks, issuer=ISSUER, audience=AUDIENCE
    )
    jwks.write_text(json.dumps({"keys": [public_jwk(new_public, "RS256", "new")]}))
    stat = jwks.stat()
    os.utime(jwks, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    # within the refresh interval unknown kids do not re-read the file
    rejected(v, signed_token(claims(), new_private, "RS256", kid="new"))
