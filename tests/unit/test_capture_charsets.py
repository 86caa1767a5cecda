"""pipeline/capture/charsets.py: the codec of a column's character set, as the server converts it."""

from __future__ import annotations

import pytest

from pipeline.capture.charsets import codec_for
from sluice_common.errors import SourceError


def test_unicode_sets_are_big_endian_as_in_mysql():
    assert "é😀".encode("utf-16-be").decode(codec_for("utf16", "utf16", "c", "d.t")) == "é😀"
    assert "é".encode("utf-32-be").decode(codec_for("utf32", "utf32", "c", "d.t")) == "é"
    assert "é".encode("utf-16-be").decode(codec_for("ucs2", "ucs2", "c", "d.t")) == "é"
    assert "é".encode("utf-16-le").decode(codec_for("utf16le", "utf16le", "c", "d.t")) == "é"


def test_latin1_is_mysqls_cp1252():
    assert bytes([0x80, 0x81, 0x9D, 0xE9]).decode(codec_for("latin1", "cp1252", "c", "d.t")) == "€\x81\x9dé"


def test_a_set_without_a_codec_is_refused_by_name():
    with pytest.raises(SourceError, match="column c of d.t is in character set eucjpms") as e:
        codec_for("eucjpms", "eucjpms", "c", "d.t")
    assert "ALTER TABLE d.t MODIFY c" in e.value.hint
