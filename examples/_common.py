"""Shared bits of the examples: where the server is, and that it answers."""

from __future__ import annotations

import argparse
import os
import sys

import httpx


def server_url(description: str) -> str:
    """`--url`, else $GRAPHKEEP_URL, else the `graphkeep serve` default.

    Exits with one line (not a traceback) when no server answers there.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--url",
        default=os.environ.get("GRAPHKEEP_URL", "http://127.0.0.1:8123"),
        help="graphkeep server URL (default: $GRAPHKEEP_URL or http://127.0.0.1:8123)",
    )
    url = str(parser.parse_args().url).rstrip("/")
    try:
        httpx.get(f"{url}/ok", timeout=5).raise_for_status()
    except httpx.HTTPError as exc:
        sys.exit(
            f"no graphkeep server answers at {url} ({type(exc).__name__}); "
            "start one with ./scripts/serve, or pass --url"
        )
    return url
