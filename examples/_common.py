"""Shared bits of the examples: where the server is."""

from __future__ import annotations

import argparse
import os


def server_url(description: str) -> str:
    """`--url`, else $GRAPHKEEP_URL, else the `graphkeep serve` default."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--url",
        default=os.environ.get("GRAPHKEEP_URL", "http://127.0.0.1:8123"),
        help="graphkeep server URL (default: $GRAPHKEEP_URL or http://127.0.0.1:8123)",
    )
    return str(parser.parse_args().url)
