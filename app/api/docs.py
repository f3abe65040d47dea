"""/docs (Swagger UI) and /redoc from assets inside the package, and `/` redirecting to them.

FastAPI's own docs pages load Swagger UI and ReDoc from a public CDN, so on a private network
they are blank. The vendored files (docs_assets/README.md says which versions, from where, and
their licences) are served from fixed URLs, one route per file.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response

DOCS_PATH = "/docs"
REDOC_PATH = "/redoc"
OPENAPI_PATH = "/openapi.json"
OAUTH2_REDIRECT_PATH = f"{DOCS_PATH}/oauth2-redirect"
# Where `/` sends a browser when the console is off (with it on, `/console`).
HOME_TARGET = DOCS_PATH
ASSETS_PREFIX = f"{DOCS_PATH}/assets"

_ASSET_DIR = Path(__file__).resolve().parent / "docs_assets"
_ASSETS: dict[str, tuple[str, str]] = {  # URL name -> (file under docs_assets, media type)
    "swagger-ui-bundle.js": ("swagger-ui/swagger-ui-bundle.js", "text/javascript"),
    "swagger-ui.css": ("swagger-ui/swagger-ui.css", "text/css"),
    "favicon.png": ("swagger-ui/favicon-32x32.png", "image/png"),
    "redoc.standalone.js": ("redoc/redoc.standalone.js", "text/javascript"),
}
# The assets are fixed for the life of the release: browsers may keep them a day.
_ASSET_CACHE = "public, max-age=86400"

# Paths that answer without credentials (the auth middleware's public set includes them).
PUBLIC_DOCS_PATHS = frozenset(
    {"/", DOCS_PATH, OAUTH2_REDIRECT_PATH, REDOC_PATH, OPENAPI_PATH}
    | {f"{ASSETS_PREFIX}/{name}" for name in _ASSETS}
)


def _asset_url(name: str) -> str:
    return f"{ASSETS_PREFIX}/{name}"


def install_docs(app: FastAPI, home_target: str = HOME_TARGET) -> None:
    """Add the docs routes (none is in the OpenAPI spec). The app is built with
    docs_url=None and redoc_url=None, so FastAPI's CDN pages are not mounted."""
    title = f"{app.title} API"

    async def home() -> Response:
        return RedirectResponse(home_target, status_code=307)

    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=OPENAPI_PATH,
            title=title,
            swagger_js_url=_asset_url("swagger-ui-bundle.js"),
            swagger_css_url=_asset_url("swagger-ui.css"),
            swagger_favicon_url=_asset_url("favicon.png"),
            oauth2_redirect_url=OAUTH2_REDIRECT_PATH,
        )

    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=OPENAPI_PATH,
            title=title,
            redoc_js_url=_asset_url("redoc.standalone.js"),
            redoc_favicon_url=_asset_url("favicon.png"),
            with_google_fonts=False,
        )

    def asset(name: str) -> Callable[[], Awaitable[Response]]:
        path, media_type = _ASSETS[name]

        async def serve_asset() -> Response:
            return FileResponse(
                _ASSET_DIR / path, media_type=media_type, headers={"cache-control": _ASSET_CACHE}
            )

        return serve_asset

    routes: list[tuple[str, Callable[[], Awaitable[Response]]]] = [
        ("/", home),
        (DOCS_PATH, swagger_ui),
        (OAUTH2_REDIRECT_PATH, oauth2_redirect),
        (REDOC_PATH, redoc),
    ]
    # one fixed path per file (no path parameter): nothing else under docs_assets is reachable
    routes += [(_asset_url(name), asset(name)) for name in _ASSETS]
    for path, endpoint in routes:
        app.add_api_route(path, endpoint, methods=["GET"], include_in_schema=False)
