"""The cluster id our Kafka service formats its storage with: a Kafka Uuid that the storage
tool's argument parser cannot take for an option (an id starting with '-' failed a CI run)."""

from __future__ import annotations

import base64
import uuid

from scripts.svc import kafka


def test_an_id_that_would_start_with_a_dash_is_drawn_again(monkeypatch):
    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: next(draws))
    cid = kafka._cluster_id()
    assert cid == base64.urlsafe_b64encode(b"\x01" * 16).decode().rstrip("=")


def test_ids_are_22_url_safe_characters_never_led_by_a_dash():
    for _ in range(2000):
        cid = kafka._cluster_id()
        assert len(cid) == 22 and not cid.startswith("-")
        assert len(base64.urlsafe_b64decode(cid + "==")) == 16
