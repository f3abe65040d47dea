"""`install_console(app)`: the console's pages and its packaged static assets."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from app.auth.console_session import CONSOLE_PREFIX
from app.console import pages, thread_pages
from app.console.render import STATIC_DIR


def install_console(app: FastAPI) -> None:
    """Mount /console (after the API routes: the API's hot paths are matched first)."""
    app.router.routes.extend(pages.router.routes)
    app.router.routes.extend(thread_pages.router.routes)
    app.mount(f"{CONSOLE_PREFIX}/static", StaticFiles(directory=STATIC_DIR), name="console-static")
