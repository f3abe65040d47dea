"""Schemathesis `--checks all` over openapi.json against a live `graphkeep serve`, per dialect.

Bounded: 30 examples per operation, examples + coverage + fuzzing phases, one worker (about
15 s per dialect). Must hold: no server error, and no response that disagrees with the spec
(status codes, content types, headers, body schemas, 405 / Allow). Two checks are reported
but not gating: `positive_data_acceptance` (ST202) flags business rules a JSON schema cannot
state (a Store label without ".", a thread that has no graph yet, semantic search without an
index); it is counted in the output. `negative_data_rejection` (ST201, a request the schema
refuses was accepted) gates: body fields take only the JSON type their schema names
(app/db/storable.py JSONInt, JSONFloat, JSONBool).

Operations that wait on a run (wait, stream, join, cancel) are left to the runs suites: the
server runs without workers here, so they would wait out their timeouts.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.api_server import serve, serve_on_new_pg_database

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EXCLUDED_PATHS = r"/wait$|/stream$|/join$|/cancel$"
# schemathesis's code for a schema-valid request that business rules refuse
NON_GATING = {"ST202"}


def _fuzz(base_url: str, report: Path) -> tuple[int, dict[str, int], str]:
    """(test cases generated, failures by code, output)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "run",
            f"{base_url}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            "30",
            "--phases",
            "examples,coverage,fuzzing",
            "--exclude-path-regex",
            EXCLUDED_PATHS,
            "--request-timeout",
            "15",
            "--generation-deterministic",
            "--continue-on-failure",
            "--max-failures",
            "1000",
            "--workers",
            "1",
            "--no-color",
        ],
        cwd=report.parent,  # its cache and reports stay out of the repository
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    report.write_text(out)
    summary = out[out.rfind("SUMMARY") :]
    generated = re.search(r"(\d+) generated", summary)
    assert generated is not None, out[-3000:]
    # "❌ ST202 Schema-valid request rejected: 37"; any failure line without a code counts too
    failures: dict[str, int] = {}
    for line in _failures(summary).splitlines()[1:]:
        count = re.search(r": (\d+)\s*$", line)
        if count:
            code = re.search(r"\bST\d+\b", line)
            failures[code.group(0) if code else line.strip()] = int(count.group(1))
    return int(generated.group(1)), failures, out


def _failures(summary: str) -> str:
    start = summary.find("Failures:")
    if start < 0:
        return ""
    end = summary.find("\n\n", start)
    return summary[start:end]


def _check(url: str, tmp_path: Path, dialect: str) -> None:
    generated, failures, out = _fuzz(url, tmp_path / f"schemathesis-{dialect}.txt")
    # the counts the report quotes (visible with -s)
    sys.stdout.write(f"\n{dialect}: {generated} test cases, failures by code: {failures}\n")
    gating = {code: n for code, n in failures.items() if code not in NON_GATING}
    assert "[500]" not in out and not gating, out[out.rfind("SUMMARY") - 6000 :]
    assert generated > 1000  # the run really exercised the API


def test_fuzz_sqlite(tmp_path: Path) -> None:
    with serve(
        f"sqlite+aiosqlite:///{tmp_path / 'gk.db'}", tmp_path / "serve.log", workers=0
    ) as url:
        _check(url, tmp_path, "sqlite")
    assert "Traceback" not in (tmp_path / "serve.log").read_text()


@pytest.mark.postgres
def test_fuzz_postgres(tmp_path: Path) -> None:
    with serve_on_new_pg_database("gk_fuzz", tmp_path / "serve.log") as url:
        _check(url, tmp_path, "postgres")
    assert "Traceback" not in (tmp_path / "serve.log").read_text()
