"""API key service on real databases, and the `graphkeep apikey` CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.auth.apikeys import (
    authenticate_api_key,
    create_api_key,
    hash_key,
    list_api_keys,
    revoke_api_key,
)
from app.db.engine import create_engine
from app.db.tables import api_keys
from app.errors import InvalidInput, NotFound

ROOT = Path(__file__).resolve().parents[2]


async def test_keys_are_stored_hashed_and_resolve_to_their_principal(
    engine: AsyncEngine,
) -> None:
    info, key = await create_api_key(
        engine, tenant_id="acme", user_id="bot", read_only=True, name="ci"
    )
    _, other = await create_api_key(engine, tenant_id="acme")
    assert key != other
    async with engine.connect() as conn:
        stored = (await conn.execute(select(api_keys))).mappings().all()
    assert len(stored) == 2
    for row in stored:
        assert key not in row.values() and other not in [str(v) for v in row.values()]
    assert hash_key(key) in {row["key_hash"] for row in stored}

    principal = await authenticate_api_key(engine, key)
    assert principal is not None
    assert (principal.tenant_id, principal.user_id, principal.read_only, principal.kind) == (
        "acme",
        "bot",
        True,
        "api_key",
    )
    default_user = await authenticate_api_key(engine, other)
    assert default_user is not None and default_user.user_id.startswith("api-key:")
    assert default_user.read_only is False
    for bogus in ("", "gk_", key[:-1], "lsv2_" + key[3:], "gk_" + "x" * 500):
        assert await authenticate_api_key(engine, bogus) is None
    assert info.name == "ci" and info.revoked_at is None


async def test_list_and_revoke(engine: AsyncEngine) -> None:
    a, key_a = await create_api_key(engine, tenant_id="acme", name="a")
    b, _ = await create_api_key(engine, tenant_id="globex", name="b")
    assert [k.key_id for k in await list_api_keys(engine, tenant_id="acme")] == [a.key_id]
    assert {k.key_id for k in await list_api_keys(engine, tenant_id=None)} == {a.key_id, b.key_id}
    assert await list_api_keys(engine, tenant_id="nobody") == []

    # revoking within the wrong tenant finds nothing and changes nothing
    with pytest.raises(NotFound):
        await revoke_api_key(engine, key_id=a.key_id, tenant_id="globex")
    assert await authenticate_api_key(engine, key_a) is not None

    revoked = await revoke_api_key(engine, key_id=a.key_id)
    assert revoked.revoked_at is not None
    assert await authenticate_api_key(engine, key_a) is None
    again = await revoke_api_key(engine, key_id=a.key_id)  # idempotent, keeps the first time
    assert again.revoked_at == revoked.revoked_at
    listed = {k.key_id: k for k in await list_api_keys(engine, tenant_id=None)}
    assert listed[a.key_id].revoked_at is not None and listed[b.key_id].revoked_at is None
    with pytest.raises(NotFound):
        await revoke_api_key(engine, key_id="00000000-0000-0000-0000-000000000000")


async def test_system_tenant_and_empty_tenant_are_refused(engine: AsyncEngine) -> None:
    for tenant in ("", "*"):
        with pytest.raises(InvalidInput):
            await create_api_key(engine, tenant_id=tenant)
    with pytest.raises(InvalidInput):
        await create_api_key(engine, tenant_id="t" * 256)
    with pytest.raises(InvalidInput):
        await create_api_key(engine, tenant_id="acme", user_id="u" * 256)
    assert await list_api_keys(engine, tenant_id=None) == []


def _cli(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GRAPHKEEP_DATABASE_URL": db_url}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "apikey", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow  # CLI start-ups
async def test_cli_create_list_revoke(tmp_path: Path) -> None:
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"  # the CLI migrates embedded SQLite
    created = _cli(db_url, "create", "--tenant", "acme", "--user", "u1", "--read-only")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert key.startswith("gk_") and "\n" not in key
    key_id = next(
        line.split()[1] for line in created.stderr.splitlines() if line.startswith("key_id:")
    )

    listed = _cli(db_url, "list", "--tenant", "acme")
    assert listed.returncode == 0, listed.stderr
    assert key_id in listed.stdout and "read-only" in listed.stdout and "active" in listed.stdout
    assert key not in listed.stdout + listed.stderr

    engine = create_engine(db_url, null_pool=True)
    try:
        principal = await authenticate_api_key(engine, key)
        assert principal is not None and (principal.tenant_id, principal.user_id) == ("acme", "u1")
        revoked = _cli(db_url, "revoke", key_id)
        assert revoked.returncode == 0, revoked.stderr
        assert await authenticate_api_key(engine, key) is None
    finally:
        await engine.dispose()
    assert "revoked" in _cli(db_url, "list").stdout
    missing = _cli(db_url, "revoke", "no-such-key")
    assert missing.returncode == 2 and "not found" in missing.stderr
    refused = _cli(db_url, "create", "--tenant", "*")
    assert refused.returncode == 2
