"""`graphkeep --help` lists every command with its help text, `--version` answers, and the
serve / migrate / openapi help (options, their help and defaults) matches its snapshot.

Regenerate the snapshots after a deliberate change with
`GRAPHKEEP_UPDATE_SNAPSHOTS=1 python -m pytest tests/unit/test_cli_help.py`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app import __version__

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
SNAPSHOTTED = ("serve", "migrate", "openapi")


def _help(*argv: str) -> str:
    # a fixed width: argparse wraps to $COLUMNS
    env = {**os.environ, "COLUMNS": "100"}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *argv, "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _commands(text: str) -> dict[str, str]:
    """The `COMMAND` block of the top-level help: name -> help text."""
    block = text.split("COMMAND\n", 2)[-1].split("\n\n")[0]
    # argparse puts a long name alone on its line and its help on the next, further in
    block = re.sub(r"^(    \S+)\n\s{6,}(\S)", r"\1  \2", block, flags=re.M)
    found = (re.match(r"^    (\S+)\s{2,}(\S.*)$", line) for line in block.splitlines())
    return {m[1]: m[2] for m in found if m}


def _registered() -> set[str]:
    # argparse names every registered command when refusing an unknown one
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "no-such-command"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    listed = done.stderr.split("choose from", 1)[1]
    return set(re.findall(r"[a-z][a-z-]*", listed))


def test_top_level_help_lists_every_command_with_its_help() -> None:
    text = _help()
    commands = _commands(text)
    assert {"serve", "worker", "migrate", "openapi", "apikey", "store"} <= set(commands)
    assert set(commands) == _registered()  # a command without help text is not listed
    assert "--version" in text
    assert "#" not in text.split("COMMAND", 1)[0]  # no code comment as the description


def test_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"graphkeep {__version__}"


@pytest.mark.parametrize("command", SNAPSHOTTED)
def test_command_help_matches_snapshot(command: str) -> None:
    text = _help(command)
    path = SNAPSHOTS / f"cli_help_{command}.txt"
    if os.environ.get("GRAPHKEEP_UPDATE_SNAPSHOTS") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"regenerate {path.name} if the change is deliberate"
    options = re.findall(r"^  (--[a-z-]+)(?: [A-Z]+)?(?:, -\w(?: [A-Z]+)?)?\s*(.*)$", text, re.M)
    for option, help_text in options:
        if option != "--help":
            assert help_text, f"{command} {option} has no help text on its line"
    if command != "migrate":
        assert text.count("default") >= len(options) - 1  # every option says its default
