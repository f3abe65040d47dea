"""/docs and /redoc render the API's operations in headless Chromium with every host but the
server's loopback address unresolvable: the pages need nothing from the internet."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.api.docs import ASSETS_PREFIX, DOCS_PATH, REDOC_PATH
from app.auth.console_session import CONSOLE_PREFIX
from tests.e2e.api_server import serve

pytestmark = pytest.mark.e2e

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    # offline: any name but the loopback address fails, so a CDN asset could not load
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--virtual-time-budget=20000",  # let the page's scripts fetch the spec and render
]


def chromium() -> str:
    """Debian's chromium; skips locally without it, fails in CI (scripts/test installs it)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is required in CI; scripts/test installs Debian's chromium")
        pytest.skip("chromium not installed")
    return path


def rendered_dom(url: str, profile: Path) -> str:
    done = subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("docs")
    with serve(f"sqlite+aiosqlite:///{tmp / 'gk.db'}", tmp / "serve.log") as url:
        yield url


def test_pages_reference_only_packaged_assets(base_url: str) -> None:
    for path in (DOCS_PATH, REDOC_PATH):
        page = httpx.get(f"{base_url}{path}").text
        urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page)
        urls += re.findall(r"url: ?['\"]([^'\"]+)['\"]", page)
        assert urls, page
        assert all(u.startswith("/") for u in urls), urls  # nothing from another host
        for asset in (u for u in urls if u.startswith(ASSETS_PREFIX)):
            got = httpx.get(f"{base_url}{asset}")
            assert got.status_code == 200 and len(got.content) > 500, asset
    missing = httpx.get(f"{base_url}{ASSETS_PREFIX}/..%2Fdocs.py")
    assert missing.status_code == 404 and missing.json()


def test_root_redirects_to_the_console(base_url: str) -> None:
    # the console is on by default; with it off, `/` leads to the docs (test_console_queries)
    got = httpx.get(f"{base_url}/")
    assert got.status_code == 307
    assert got.headers["location"] == CONSOLE_PREFIX


def test_swagger_ui_renders_the_operations_offline(base_url: str, tmp_path: Path) -> None:
    dom = rendered_dom(f"{base_url}{DOCS_PATH}", tmp_path)
    paths = set(re.findall(r'class="opblock-summary-path" data-path="([^"]+)"', dom))
    assert {"/threads", "/threads/{thread_id}/runs", "/assistants/search"} <= paths, paths


def test_redoc_renders_the_operations_offline(base_url: str, tmp_path: Path) -> None:
    dom = rendered_dom(f"{base_url}{REDOC_PATH}", tmp_path)
    assert "/threads/{thread_id}/runs" in dom
    assert "Create Thread" in dom  # an operation's summary, rendered from the spec
