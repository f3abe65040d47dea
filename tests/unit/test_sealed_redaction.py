"""The sealed envelope and keyring, the in-Python Store filter, and the redactor."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from app import redaction
from app.config import Settings
from app.db import sealed
from app.db.sealed import DecryptionFailed, Keyring, key_id
from app.logging import configure
from app.redaction import MASK, Redactor
from app.store.filters import flatten_filter
from app.store.sealed_filters import matches

A = "a" * 32
B = "b" * 32


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    sealed.install(Keyring())
    redaction.install(Redactor())


def test_envelope_names_its_key_and_every_configured_key_opens_it() -> None:
    old = Keyring.from_keys(A)
    text = old.seal_text('{"x":1}')
    assert text.startswith(f"gk1:{key_id(A.encode())}:")
    assert old.seal_text('{"x":1}') != text  # a fresh nonce every time
    rotated = Keyring.from_keys(B, [A])
    assert rotated.open_text(text) == '{"x":1}'
    assert rotated.seal_bytes(b"v")[:8].hex() == key_id(B.encode())
    with pytest.raises(DecryptionFailed, match=key_id(A.encode())):
        Keyring.from_keys(B).open_text(text)
    with pytest.raises(DecryptionFailed, match="set GRAPHKEEP_ENCRYPTION_KEY"):
        Keyring().open_text(text)
    tampered = text[:-4] + ("AAAA" if not text.endswith("AAAA") else "BBBB")
    with pytest.raises(DecryptionFailed, match="authentication"):
        old.open_text(tampered)


def test_seal_json_round_trip_and_plaintext_passes_through() -> None:
    assert sealed.seal_json({"a": 1}) == {"a": 1}  # no key: stored as is
    sealed.install(Keyring.from_keys(A))
    stored = sealed.seal_json({"a": "secret"})
    assert isinstance(stored, str) and "secret" not in stored
    assert sealed.open_json(stored) == {"a": "secret"}
    assert sealed.open_json({"plain": True}) == {"plain": True}  # written before the key
    assert sealed.seal_json({}) == {} and sealed.seal_json(None) is None


@pytest.mark.parametrize(
    ("value", "flt", "expected"),
    [
        ({"a": 1}, {"a": 1.0}, True),
        ({"a": True}, {"a": 1}, False),
        ({"a": {"b": "x"}}, {"a": {"b": "x"}}, True),
        ({"a": 3}, {"a": {"$gt": 2, "$lte": 3}}, True),
        ({"a": "3"}, {"a": {"$gt": 2}}, False),
        ({}, {"a": {"$ne": 1}}, True),
        ({}, {"a": None}, True),
        ({"l": [1, 2]}, {"l": [1, 2]}, True),
        ({"l": [1, 2, 3]}, {"l": [1, 2]}, False),
    ],
)
def test_python_filter_follows_the_sql_semantics(value: dict, flt: dict, expected: bool) -> None:
    leaves, values = flatten_filter(flt)
    assert matches(value, leaves, values) is expected


def test_redactor_keys_paths_and_text() -> None:
    r = Redactor(["password", "user.ssn"])
    value = {"password": "p", "user": {"ssn": "1", "name": "n"}, "node": {"user": {"ssn": "2"}}}
    assert r.value(value) == {
        "password": MASK,
        "user": {"ssn": MASK, "name": "n"},
        "node": {"user": {"ssn": MASK}},
    }
    assert value["password"] == "p"  # a copy
    assert json.loads(r.json_text('[{"password":"p"}]')) == [{"password": MASK}]
    assert r.text("login failed password=hunter2, user ok") == (
        f"login failed password={MASK}, user ok"
    )
    assert r.text('{"ssn": "123"}') == f'{{"ssn": {MASK}}}'
    assert Redactor().json_text('{"password":"p"}') == '{"password":"p"}'


def test_log_lines_are_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    configure(Settings(log_format="json", log_level="INFO"))
    redaction.install(Redactor(["password"]))
    try:
        raise ValueError("bad password=hunter2")
    except ValueError:
        logging.getLogger("gk.test").exception("failed with password: hunter2")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    err = capsys.readouterr().err
    assert "hunter2" not in err and MASK in err
