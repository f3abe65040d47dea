"""Bearer JWT verification. The only module that imports python-jose.

Keys are chosen by the token's algorithm family, never by trusting the header alone:
HS* tokens are checked only against the shared secret, RS*/ES* tokens only against the
configured public keys (PEM file or JWKS file, picked by `kid`). Each `jwt.decode` call passes
exactly one allowed algorithm, so `alg: none` and the "RSA public key used as an HMAC secret"
confusion both fail before any signature is computed.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from jose import jwk, jwt
from jose.exceptions import ExpiredSignatureError, JOSEError, JWTClaimsError

from app.auth.principal import Principal
from app.db.storable import text_problem
from app.errors import Unauthorized

log = logging.getLogger(__name__)

HMAC_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})
PUBLIC_KEY_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "ES256", "ES384", "ES512"})
SUPPORTED_ALGORITHMS = HMAC_ALGORITHMS | PUBLIC_KEY_ALGORITHMS
MIN_SECRET_BYTES = 32
MAX_ID_CHARS = 255  # tenant and user ids fit the tenant_id / user_id columns
JWKS_REFRESH_SECONDS = 10.0
MAX_TOKEN_CHARS = 16_384  # far above any real token; bounds the work a junk header causes

# Scopes (the OAuth `scope` claim, space separated, or a JSON list of strings). Fail closed:
# a token without a `scope` claim has full access within its tenant; one with the claim gets
# write access only when it names WRITE_SCOPE, read-only access when it names READ_SCOPE but
# not WRITE_SCOPE, and a 401 when the claim is malformed or names neither (exact, lower case;
# other scopes beside them are ignored).
READ_SCOPE = "read"
WRITE_SCOPE = "write"
KNOWN_SCOPES = frozenset({READ_SCOPE, WRITE_SCOPE})

# The one message a client sees for any bad token: which check failed is logged (by name,
# never the token) but not returned, so the error body cannot be used as an oracle.
INVALID_TOKEN = "invalid or expired token"


class AuthConfigError(ValueError):
    """The server's JWT settings are unusable (raised at start-up, not per request)."""


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise AuthConfigError(f"cannot read {path}: {exc.strerror}") from None


def _usable(key: Mapping[str, Any] | str, algorithms: frozenset[str]) -> bool:
    """Whether python-jose can verify with `key` under one of the enabled algorithms."""
    kty = key.get("kty") if isinstance(key, Mapping) else None
    for alg in sorted(algorithms & PUBLIC_KEY_ALGORITHMS):
        if kty is not None and _kty_for(alg) != kty:
            continue
        try:
            jwk.construct(key, alg)
            return True
        except JOSEError:
            continue
    return False


def _check_key(key: str, algorithms: frozenset[str], source: Path) -> None:
    """Fail at start-up, not on every request, when a configured key cannot be used."""
    if not _usable(key, algorithms):
        raise AuthConfigError(f"{source} holds no public key usable with {sorted(algorithms)}")


def _kty_for(alg: str) -> str:
    if alg in HMAC_ALGORITHMS:
        return "oct"
    return "RSA" if alg.startswith("RS") else "EC"


def _load_jwks(path: Path, algorithms: frozenset[str]) -> list[dict[str, Any]]:
    """The usable public keys of a JWKS file; AuthConfigError if it has none or is malformed."""
    try:
        document = json.loads(_read(path))
    except json.JSONDecodeError:
        raise AuthConfigError(f"{path} is not valid JSON") from None
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not all(isinstance(k, dict) for k in entries):
        raise AuthConfigError(f"{path} is not a JWKS document ({{'keys': [...]}})")
    if any("d" in e or e.get("kty") == "oct" for e in entries):
        raise AuthConfigError(f"{path} must hold public keys only")
    # unusable entries are skipped: an IdP's set may hold EC keys while only RS256 is on
    usable = [e for e in entries if _usable(e, algorithms)]
    if not usable:
        raise AuthConfigError(f"{path} holds no public key usable with {sorted(algorithms)}")
    return usable


class _JWKSFile:
    """A JWKS file's keys, re-read when the file changes: rotating keys needs no restart.

    A token with an unknown `kid` triggers at most one `stat` per `refresh_seconds`, and a
    re-read only if the file's mtime moved; a broken new file keeps the previous keys.
    """

    def __init__(self, path: Path, algorithms: frozenset[str], refresh_seconds: float) -> None:
        self.path = path
        self.algorithms = algorithms
        self.refresh_seconds = refresh_seconds
        self.keys = _load_jwks(path, algorithms)
        self.by_kid = _index(self.keys)
        self._mtime = _mtime(path)
        self._checked = time.monotonic()

    def maybe_reload(self) -> None:
        now = time.monotonic()
        if now - self._checked < self.refresh_seconds:
            return
        self._checked = now
        mtime = _mtime(self.path)
        if mtime == self._mtime:
            return
        self._mtime = mtime
        try:
            keys = _load_jwks(self.path, self.algorithms)
        except AuthConfigError as exc:
            log.warning("jwks reload failed; keeping the previous keys", extra={"error": str(exc)})
            return
        self.keys, self.by_kid = keys, _index(keys)
        log.info("jwks reloaded", extra={"keys": len(keys)})


def _index(keys: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {k["kid"]: k for k in keys if isinstance(k.get("kid"), str)}


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


@dataclass(frozen=True)
class JWTVerifier:
    """Verifies bearer tokens and maps their claims to a `Principal`.

    Build it with `JWTVerifier.from_config(...)`; it holds only public material and the
    HMAC secret. The only I/O after start-up is the rate-limited JWKS check on an unknown kid.
    """

    algorithms: frozenset[str]
    secret: str | None = None
    public_keys: tuple[str, ...] = ()  # PEM
    jwks: _JWKSFile | None = None
    issuer: str | None = None
    audience: str | None = None
    leeway_seconds: int = 30
    tenant_claim: str = "tenant_id"

    @classmethod
    def from_config(
        cls,
        *,
        algorithms: Sequence[str],
        secret: str | None = None,
        public_key_file: Path | None = None,
        jwks_file: Path | None = None,
        issuer: str | None = None,
        audience: str | None = None,
        leeway_seconds: int = 30,
        tenant_claim: str = "tenant_id",
        jwks_refresh_seconds: float = JWKS_REFRESH_SECONDS,
    ) -> JWTVerifier:
        """Validate the configuration and load key files (sync; call once at start-up)."""
        algs = frozenset(algorithms)
        if not algs:
            raise AuthConfigError("GRAPHKEEP_JWT_ALGORITHMS must name at least one algorithm")
        unknown = algs - SUPPORTED_ALGORITHMS
        if unknown:
            raise AuthConfigError(
                f"unsupported JWT algorithms {sorted(unknown)}; "
                f"choose from {sorted(SUPPORTED_ALGORITHMS)}"
            )
        if algs & HMAC_ALGORITHMS and not secret:
            raise AuthConfigError("an HS* algorithm is enabled but GRAPHKEEP_JWT_SECRET is unset")
        if secret and len(secret.encode()) < MIN_SECRET_BYTES:
            # RFC 7518 3.2: an HMAC key at least as long as the hash output
            raise AuthConfigError(f"GRAPHKEEP_JWT_SECRET must be at least {MIN_SECRET_BYTES} bytes")
        keys: list[str] = []
        if public_key_file is not None:
            pem = _read(public_key_file)
            _check_key(pem, algs, public_key_file)
            keys.append(pem)
        jwks = _JWKSFile(jwks_file, algs, jwks_refresh_seconds) if jwks_file else None
        if algs & PUBLIC_KEY_ALGORITHMS and not keys and jwks is None:
            raise AuthConfigError(
                "an RS*/ES* algorithm is enabled but neither GRAPHKEEP_JWT_PUBLIC_KEY_FILE "
                "nor GRAPHKEEP_JWT_JWKS_FILE is set"
            )
        if not tenant_claim:
            raise AuthConfigError("GRAPHKEEP_JWT_TENANT_CLAIM must not be empty")
        return cls(
            algorithms=algs,
            secret=secret,
            public_keys=tuple(keys),
            jwks=jwks,
            issuer=issuer,
            audience=audience,
            leeway_seconds=leeway_seconds,
            tenant_claim=tenant_claim,
        )

    # ------------------------------------------------------------------ verification

    def _candidate_keys(self, alg: str, kid: str | None) -> list[Mapping[str, Any] | str]:
        if alg in HMAC_ALGORITHMS:
            return [self.secret] if self.secret else []
        jwks = self.jwks
        if jwks is not None and kid is not None and kid not in jwks.by_kid:
            jwks.maybe_reload()  # a new kid may mean the issuer rotated its keys
        candidates: list[Mapping[str, Any] | str]
        if jwks is not None and kid is not None and kid in jwks.by_kid:
            candidates = [jwks.by_kid[kid]]
        else:
            # A kid we do not know may still match the PEM key (which has no kid), or an
            # unlabelled JWKS entry; a labelled entry is never tried for a different kid.
            unlabelled = [k for k in jwks.keys if "kid" not in k] if jwks is not None else []
            candidates = [*self.public_keys, *unlabelled]
        kty = _kty_for(alg)
        return [
            k
            for k in candidates
            if isinstance(k, str) or (k.get("kty") == kty and k.get("alg", alg) == alg)
        ]

    def _decode(self, token: str) -> dict[str, Any]:
        if len(token) > MAX_TOKEN_CHARS:
            raise Unauthorized(INVALID_TOKEN)
        try:
            header = jwt.get_unverified_header(token)
        except JOSEError:
            raise Unauthorized(INVALID_TOKEN) from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms:
            log.info("jwt rejected", extra={"reason": "algorithm not allowed"})
            raise Unauthorized(INVALID_TOKEN)
        kid = header.get("kid") if isinstance(header.get("kid"), str) else None
        options = {
            "leeway": self.leeway_seconds,
            "require_exp": True,
            "require_sub": True,
            "require_aud": self.audience is not None,
            "require_iss": self.issuer is not None,
        }
        for candidate in self._candidate_keys(alg, kid):
            try:
                key = jwk.construct(candidate, alg)
                claims: dict[str, Any] = jwt.decode(
                    token,
                    key,
                    algorithms=[alg],
                    audience=self.audience,
                    issuer=self.issuer,
                    options=options,
                )
            except ExpiredSignatureError:
                log.info("jwt rejected", extra={"reason": "expired"})
                raise Unauthorized(INVALID_TOKEN) from None
            except JWTClaimsError as exc:
                # claim checks run only after the signature matched: no other key can help
                log.info("jwt rejected", extra={"reason": f"claims: {type(exc).__name__}"})
                raise Unauthorized(INVALID_TOKEN) from None
            except JOSEError:
                continue  # signature did not match this key; try the next one
            return claims
        log.info("jwt rejected", extra={"reason": "no key verified the signature"})
        raise Unauthorized(INVALID_TOKEN)

    def verify(self, token: str) -> Principal:
        """Return the caller for a valid token; raise `Unauthorized` for anything else."""
        claims = self._decode(token)
        tenant = claims.get(self.tenant_claim)
        subject = claims.get("sub")
        if not is_valid_id(tenant) or tenant == "*":
            # "*" owns the system assistants; no caller may act as that tenant
            log.info("jwt rejected", extra={"reason": "missing or malformed tenant claim"})
            raise Unauthorized(INVALID_TOKEN)
        if not is_valid_id(subject):
            log.info("jwt rejected", extra={"reason": "missing or malformed sub claim"})
            raise Unauthorized(INVALID_TOKEN)
        scopes = parse_scopes(claims["scope"]) if "scope" in claims else None
        if scopes is not None and not scopes & KNOWN_SCOPES:
            # fail closed: a scope claim we do not understand grants nothing
            log.info("jwt rejected", extra={"reason": "malformed or unrecognised scope claim"})
            raise Unauthorized(INVALID_TOKEN)
        return Principal(
            tenant_id=tenant,
            user_id=subject,
            read_only=scopes is not None and WRITE_SCOPE not in scopes,
            scopes=scopes or frozenset(),
            kind="jwt",
        )


def is_valid_id(value: object) -> TypeGuard[str]:
    """A tenant or user id: a string of 1..MAX_ID_CHARS characters, not blank, without
    surrounding whitespace, without control characters, NULs or lone surrogates."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_ID_CHARS
        and value.strip() == value
        and value.isprintable()
        and text_problem(value) is None
    )


def parse_scopes(raw: object) -> frozenset[str]:
    """The `scope` claim as a set: a space-separated string (RFC 8693) or a list of strings.

    Anything else (a number, an object, a list with non-strings, blank or unprintable scope
    names) is the empty set, which `verify` refuses."""
    if isinstance(raw, str):
        names: list[object] = list(raw.split(" "))
    elif isinstance(raw, list):
        names = list(raw)
    else:
        return frozenset()
    if not names or not all(isinstance(n, str) and n and n.isprintable() for n in names):
        return frozenset()
    return frozenset(n for n in names if isinstance(n, str))


def is_read_only(scopes: frozenset[str]) -> bool:
    """Read-only means the token grants `read` but not `write`."""
    return READ_SCOPE in scopes and WRITE_SCOPE not in scopes
