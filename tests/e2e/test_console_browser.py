"""The console in a real browser (Debian's chromium via Playwright) against live servers on
SQLite and PostgreSQL, with real runs: overview, the checkpoint tree with forks, a diff, fork
and replay from a checkpoint, the interrupts inbox, the Store, the chat pane, JWT sign-in
with tenant isolation and a read-only token. Every request that is not to the server is
aborted (the console must work with the network disabled) and recorded, and none may occur.

Set GK_CONSOLE_SCREENSHOTS=docs/console to refresh the README's screenshots.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from app.assistants.service import system_assistant_id
from tests.authkit import AUDIENCE, HS_SECRET, ISSUER, bearer, claims, hs_token
from tests.conftest import drop_pg_database
from tests.e2e.runs_fixtures import fresh_database, read_records
from tests.e2e.runs_server import serve

playwright_sync = pytest.importorskip("playwright.sync_api")
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
SHOTS = os.environ.get("GK_CONSOLE_SCREENSHOTS")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium"),
]


@dataclass
class Console:
    url: str  # auth off
    jwt_url: str  # auth on (JWT)
    dialect: str
    record: Path
    api: httpx.Client
    browser: Any
    outside: list[str] = field(default_factory=list)  # requests the browser tried elsewhere

    def page(self, base: str | None = None) -> Any:
        context = self.browser.new_context(viewport={"width": 1280, "height": 860})
        context.set_default_timeout(15_000)
        host = urlparse(base or self.url).hostname

        def offline(route: Any) -> None:
            if urlparse(route.request.url).hostname != host:
                self.outside.append(route.request.url)
                route.abort()
            else:
                route.continue_()

        context.route("**/*", offline)
        return context.new_page()

    def records(self, tag: str) -> list[str]:
        return [node for node, _pid in read_records(self.record, tag)]


def _shot(c: Console, page: Any, name: str) -> None:
    if SHOTS and c.dialect == "sqlite":
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def _settled_detail(page: Any, selector: str) -> None:
    """Wait for `selector` in #detail once htmx has settled the swap that brought it there.
    htmx processes swapped-in content when the swap settles (about 20 ms later, longer on a
    loaded machine); until then a form's `hx-post` is plain HTML, and a click submits the
    form natively instead (the replay test once lost its click that way). The target keeps
    htmx's settling class until the new content is processed."""
    page.wait_for_selector(f"#detail:not(.htmx-settling) {selector}")


def _wait(
    predicate: Callable[[], bool],
    what: str,
    timeout: float = 60,
    seen: Callable[[], Any] | None = None,
) -> None:
    """Poll `predicate`; on time-out, fail with `seen()` (the last state observed), so a
    failure under load says what the server answered instead of only that it timed out."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            last = f"; last seen: {seen()!r}" if seen is not None else ""
            raise AssertionError(f"timed out waiting for {what}{last}")
        time.sleep(0.1)


def _runs_of(c: Console, thread_id: str, last: list[Any]) -> list[Any]:
    """The thread's runs (as listed by the API); `last` keeps the answer for `_wait`."""
    r = c.api.get(f"/threads/{thread_id}/runs")
    body = r.json()
    last[:] = [r.status_code, body]
    return list(body) if r.status_code == 200 else []


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def console(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, browser: Any
) -> Iterator[Console]:
    dialect = str(request.param)
    tmp = tmp_path_factory.mktemp(f"console_{dialect}")
    jwt_tmp = tmp / "jwt"
    jwt_tmp.mkdir()
    # migrations use asyncio.run, and sync Playwright owns this thread's event loop
    with ThreadPoolExecutor(1) as pool:
        open_db = pool.submit(fresh_database, dialect, tmp).result()
        jwt_db = pool.submit(fresh_database, dialect, jwt_tmp).result()
    record = tmp / "record.txt"
    jwt_env = {
        "GRAPHKEEP_AUTH": "jwt",
        "GRAPHKEEP_JWT_SECRET": HS_SECRET,
        "GRAPHKEEP_JWT_ISSUER": ISSUER,
        "GRAPHKEEP_JWT_AUDIENCE": AUDIENCE,
    }
    try:
        with (
            serve(open_db, tmp, workers=2, record_file=record) as proc,
            serve(jwt_db, jwt_tmp, workers=1, env=jwt_env, name="jwt") as jwt_proc,
            httpx.Client(base_url=str(proc.url), timeout=30) as api,
        ):
            console = Console(str(proc.url), str(jwt_proc.url), dialect, record, api, browser)
            yield console
            assert not console.outside, f"requests left the host: {console.outside}"
    finally:
        if dialect == "postgres":
            with ThreadPoolExecutor(1) as pool:  # asyncio.run again, off the loop's thread
                pool.submit(drop_pg_database, open_db).result()
                pool.submit(drop_pg_database, jwt_db).result()


def _thread(c: Console, **metadata: Any) -> str:
    r = c.api.post("/threads", json={"metadata": metadata})
    assert r.status_code == 200, r.text
    return str(r.json()["thread_id"])


def _history(c: Console, thread_id: str) -> list[dict[str, Any]]:
    r = c.api.post(f"/threads/{thread_id}/history", json={"limit": 100})
    assert r.status_code == 200, r.text
    return list(r.json())


def _ran_steps(c: Console, tag: str) -> tuple[str, list[dict[str, Any]]]:
    thread_id = _thread(c, purpose=tag)
    r = c.api.post(
        f"/threads/{thread_id}/runs/wait", json={"assistant_id": "steps", "input": {"tag": tag}}
    )
    assert r.status_code == 200, r.text
    return thread_id, _history(c, thread_id)


def _at_step(history: list[dict[str, Any]], step: int) -> str:
    return str(next(h for h in history if h["metadata"]["step"] == step)["checkpoint_id"])


def test_overview_lists_a_new_thread_and_works_offline(console: Console) -> None:
    c = console
    thread_id = _thread(c, owner="overview-check")
    page = c.page()
    page.goto(f"{c.url}/")  # `/` leads to the console
    assert urlparse(page.url).path == "/console"
    page.wait_for_selector(f"#threads tr[data-thread-id='{thread_id}']")
    page.wait_for_selector("#stats [data-stat='store']")
    assert page.evaluate("typeof window.htmx") == "object"  # the vendored script ran
    page.fill("input[name=metadata]", "owner=overview-check")
    page.click("#thread-search button[type=submit]")
    page.wait_for_function("document.querySelectorAll('#threads tr[data-thread-id]').length === 1")
    assert page.get_attribute("#threads tr[data-thread-id]", "data-thread-id") == thread_id
    _shot(c, page, "overview")
    page.context.close()


def test_fork_shows_both_branches_and_a_diff(console: Console) -> None:
    c = console
    thread_id, history = _ran_steps(c, f"tree-{c.dialect}")
    fork_at = _at_step(history, 1)
    r = c.api.post(
        f"/threads/{thread_id}/state",
        json={"values": {"trail": ["fixed"]}, "as_node": "a", "checkpoint_id": fork_at},
    )
    assert r.status_code == 200, r.text
    forked = r.json()["checkpoint_id"]
    expected = {h["checkpoint_id"] for h in _history(c, thread_id)}
    page = c.page()
    page.goto(f"{c.url}/console/threads/{thread_id}")
    page.wait_for_selector("#tree li.cp")
    ids = set(
        page.eval_on_selector_all("#tree li.cp", "els => els.map(e => e.dataset.checkpointId)")
    )
    assert ids == expected
    fork_li = page.locator(f"#tree li[data-checkpoint-id='{forked}']")
    assert "fork" in (fork_li.get_attribute("class") or "")
    assert "newest" in (fork_li.get_attribute("class") or "")
    assert fork_li.get_attribute("data-parent-id") == fork_at
    lanes = set(page.eval_on_selector_all("#tree li.cp", "els => els.map(e => e.dataset.lane)"))
    assert lanes == {"0", "1"}  # two branches
    original = _at_step(history, 2)  # the same step on the first branch
    assert page.get_attribute(f"#tree li[data-checkpoint-id='{original}']", "data-node") == "b"
    page.check(f"#tree li[data-checkpoint-id='{original}'] input.pick")
    page.check(f"#tree li[data-checkpoint-id='{forked}'] input.pick")
    page.click("#compare")
    page.wait_for_selector("#detail .diff tr[data-key='trail']")
    assert page.get_attribute("#detail .diff tr[data-key='trail']", "data-kind") == "changed"
    assert page.get_attribute("#detail .diff tr[data-key='tag']", "data-kind") == "same"
    _shot(c, page, "thread-diff")
    page.context.close()


def test_fork_from_here_makes_a_branch_the_api_confirms(console: Console) -> None:
    c = console
    thread_id, history = _ran_steps(c, f"fork-{c.dialect}")
    at = _at_step(history, 1)
    page = c.page()
    page.goto(f"{c.url}/console/threads/{thread_id}")
    page.click(f"#tree li[data-checkpoint-id='{at}'] a.open")
    _settled_detail(page, f".checkpoint[data-checkpoint-id='{at}']")
    assert page.input_value("#detail form.fork input[name=as_node]") == "a"
    page.fill("#detail form.fork textarea[name=values]", '{"trail": ["from-console"]}')
    page.click("#detail [data-action=fork]")
    page.wait_for_url("**/console/threads/*?new=*")
    new_id = page.url.split("new=")[1]
    page.wait_for_selector(f"#tree li.highlight[data-checkpoint-id='{new_id}']")
    state = c.api.get(f"/threads/{thread_id}/state").json()
    assert state["checkpoint"]["checkpoint_id"] == new_id
    assert state["values"]["trail"] == ["a", "from-console"]
    assert state["checkpoint"]["checkpoint_id"] in {
        h["checkpoint_id"] for h in _history(c, thread_id)
    }
    assert page.get_attribute(f"#tree li[data-checkpoint-id='{new_id}']", "data-parent-id") == at
    page.context.close()


def test_replay_from_here_reruns_only_later_nodes(console: Console) -> None:
    c = console
    tag = f"replay-{c.dialect}"
    thread_id, history = _ran_steps(c, tag)
    assert c.records(tag) == ["a", "b", "c"]
    at = _at_step(history, 1)  # after a, before b
    page = c.page()
    page.goto(f"{c.url}/console/threads/{thread_id}")
    page.click(f"#tree li[data-checkpoint-id='{at}'] a.open")
    _settled_detail(page, f".checkpoint[data-checkpoint-id='{at}'] [data-action=replay]")
    page.click("#detail [data-action=replay]")
    last: list[Any] = []
    _wait(
        lambda: len(_runs_of(c, thread_id, last)) == 2,
        "the replay run",
        seen=lambda: (last, c.records(tag)),
    )
    page.wait_for_selector("#runs tr[data-status='success'] >> nth=1")
    runs = c.api.get(f"/threads/{thread_id}/runs").json()
    assert [r["status"] for r in runs] == ["success", "success"]
    assert c.records(tag) == ["a", "b", "c", "b", "c"]
    page.click("#runs tr[data-run-id] >> nth=0 >> button")
    page.wait_for_selector("#events li b")
    _shot(c, page, "thread")
    page.context.close()


def test_interrupt_answered_in_the_inbox_completes_the_run(console: Console) -> None:
    c = console
    thread_id = _thread(c)
    r = c.api.post(
        f"/threads/{thread_id}/runs/wait",
        json={"assistant_id": "asker", "input": {"question": "ship it?", "tag": "inbox"}},
    )
    assert r.status_code == 200, r.text
    assert c.api.get(f"/threads/{thread_id}").json()["status"] == "interrupted"
    page = c.page()
    page.goto(f"{c.url}/console/interrupts")
    article = page.locator(f"article.inbox[data-thread-id='{thread_id}']")
    assert "ship it?" in article.inner_text()
    _shot(c, page, "interrupts")
    article.locator("textarea[name=resume]").fill('"sure"')
    article.locator("[data-action=resume]").click()
    page.wait_for_url(f"**/console/threads/{thread_id}")
    page.wait_for_selector("#runs tr[data-status='success']")
    _wait(lambda: c.api.get(f"/threads/{thread_id}").json()["status"] == "idle", "idle")
    assert c.api.get(f"/threads/{thread_id}/state").json()["values"]["answer"] == "sure!"
    page.context.close()


def test_a_store_item_put_through_the_api_appears(console: Console) -> None:
    c = console
    body = {"namespace": ["notes", "alice"], "key": "k1", "value": {"text": "x" * 5000}}
    assert c.api.put("/store/items", json=body).status_code in (200, 204)
    page = c.page()
    page.goto(f"{c.url}/console/store")
    page.click("a[data-namespace='notes']")
    page.click("a[data-namespace='notes.alice']")
    row = page.locator("tr[data-key='k1'][data-namespace='notes.alice']")
    assert row.count() == 1
    assert "KB" in row.locator("details.value summary").inner_text()  # big: collapsed, sized
    _shot(c, page, "store")
    page.context.close()


def test_assistant_graph_and_chat_streams(console: Console) -> None:
    c = console
    page = c.page()
    page.goto(f"{c.url}/console/assistants?id={system_assistant_id('chat')}")
    assert page.locator("svg.graph g.gnode[data-node='_reply'], svg.graph g.gnode").count() >= 3
    page.fill("#chat-form input[name=message]", "hello there")
    page.click("#chat-form [data-action=chat]")
    page.wait_for_selector(".turn.ai.done")
    assert page.inner_text(".turn.ai") == "echo hello there"
    _shot(c, page, "assistants")
    page.context.close()


def test_jwt_sign_in_isolates_tenants_and_read_only_sees_no_actions(console: Console) -> None:
    c = console
    acme = hs_token(claims(tenant="acme", sub="alice", ttl=600))
    globex = hs_token(claims(tenant="globex", sub="gina", ttl=600))
    reader = hs_token(claims(tenant="acme", sub="rita", ttl=600, scope="read"))
    with httpx.Client(base_url=c.jwt_url, timeout=30) as api:
        mine = api.post("/threads", json={"metadata": {"who": "acme"}}, headers=bearer(acme))
        ran = api.post(
            f"/threads/{mine.json()['thread_id']}/runs/wait",
            json={"assistant_id": "steps", "input": {"tag": "jwt"}},
            headers=bearer(acme),
        )
        assert ran.status_code == 200, ran.text
        theirs = api.post("/threads", json={"metadata": {"who": "globex"}}, headers=bearer(globex))
    mine_id, theirs_id = mine.json()["thread_id"], theirs.json()["thread_id"]
    page = c.page(c.jwt_url)
    page.goto(f"{c.jwt_url}/console")
    assert urlparse(page.url).path == "/console/login"
    _shot(c, page, "sign-in")
    page.fill("#token", acme)
    page.click("form button[type=submit]")
    page.wait_for_selector(f"#threads tr[data-thread-id='{mine_id}']")
    assert page.locator(f"#threads tr[data-thread-id='{theirs_id}']").count() == 0
    cookie = next(k for k in page.context.cookies() if k["name"] == "gk_console_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/console"
    assert acme not in page.url
    response = page.goto(f"{c.jwt_url}/console/threads/{theirs_id}")
    assert response is not None and response.status == 404
    assert page.get_attribute("section.error", "data-status") == "404"
    page.goto(f"{c.jwt_url}/console/threads/{mine_id}")
    assert page.locator("[data-action]").count() > 0
    page.context.close()

    page = c.page(c.jwt_url)
    page.goto(f"{c.jwt_url}/console/login")
    page.fill("#token", reader)
    page.click("form button[type=submit]")
    page.wait_for_selector(f"#threads tr[data-thread-id='{mine_id}']")
    page.goto(f"{c.jwt_url}/console/threads/{mine_id}")
    page.click("#tree li.cp >> nth=1 >> a.open")
    page.wait_for_selector("#detail .checkpoint")
    assert page.locator("[data-action]").count() == 0  # no fork, replay, delete or answer
    page.context.close()
