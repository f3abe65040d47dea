"""Schemathesis over the OpenAPI spec against a live `graphkeep serve`: no input gives a 5xx.

Bounded (a few examples per operation) so it runs in well under a minute. Run endpoints are
left to the runs suite, and so is the thread stream: fuzzing them would start graph
executions and long-lived streams.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings

from tests.e2e.api_server import serve

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def live_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    tmp = tmp_path_factory.mktemp("fuzz")
    with serve(f"sqlite+aiosqlite:///{tmp / 'gk.db'}", tmp / "serve.log", workers=0) as url:
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
        yield schema.exclude(path_regex=r"/runs|/stream$")


schema = schemathesis.pytest.from_fixture("live_schema")


@schema.parametrize()
@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_no_server_error(case) -> None:
    response = case.call(timeout=15)
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"
    )
    if response.status_code >= 400:
        detail = response.json().get("detail")
        assert isinstance(detail, str), response.text[:500]
