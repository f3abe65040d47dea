"""langgraph-checkpoint-conformance: all eight capabilities, on PostgreSQL and SQLite."""

from __future__ import annotations

from collections.abc import AsyncIterator

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability
from sqlalchemy.ext.asyncio import AsyncEngine

from app.checkpoint import SQLSaver, make_serde


async def _validate(saver: SQLSaver, name: str) -> None:
    @checkpointer_test(name=name)
    async def factory() -> AsyncIterator[SQLSaver]:
        yield saver

    report = await validate(factory)
    assert set(report.results) == {c.value for c in Capability}
    problems = {
        cap: (result.passed, result.tests_skipped, result.failures)
        for cap, result in report.results.items()
        if not result.passed or not result.detected or result.tests_skipped or result.tests_failed
    }
    assert not problems, problems
    assert all(r.tests_passed > 0 for r in report.results.values())


async def test_conformance_all_capabilities(engine: AsyncEngine) -> None:
    await _validate(SQLSaver(engine), f"SQLSaver-{engine.dialect.name}")


async def test_conformance_encrypted_and_tenant_scoped(engine: AsyncEngine) -> None:
    saver = SQLSaver(engine, serde=make_serde("k" * 32)).for_tenant("tenant-b")
    await _validate(saver, f"SQLSaver-encrypted-{engine.dialect.name}")
