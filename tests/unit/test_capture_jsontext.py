"""pipeline/capture/jsontext.py: MySQL's JSON text of doubles (the boundaries MySQL 9.7 printed)."""

from __future__ import annotations

import pytest

from pipeline.capture.jsontext import Raw, _values, double_text, render


@pytest.mark.parametrize("x, text", [
    (1e300, "1e300"), (0.1, "0.1"), (1.5e-7, "0.00000015"), (1e-5, "0.00001"), (1e-15, "0.000000000000001"),
    (1e-16, "1e-16"), (1.2345e-16, "1.2345e-16"), (1e14, "100000000000000.0"), (1e15, "1e15"),
    (1.2345e15, "1.2345e15"), (1.2345678901234567e15, "1234567890123456.8"),
    (1.2345678901234567e16, "1.2345678901234568e16"), (100.0, "100.0"), (-0.0, "-0.0"), (0.0, "0.0"),
    (-2.5e-300, "-2.5e-300"), (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e308"),
    (123456789.123, "123456789.123"), (1.2345678901234567e-8, "0.000000012345678901234567"),
])
def test_doubles_as_mysql_prints_them(x, text):
    assert double_text(x) == text


def test_a_document_with_raw_values_renders_them_as_written():
    doc = {"a": [Raw("1e300"), 1, "x"], "b": Raw('"2024-01-02"')}
    assert render(doc) == '{"a": [1e300, 1, "x"], "b": "2024-01-02"}'


def test_bytes_the_parser_leaves_are_text_and_doubles_mysqls():
    """(moved from test_dmlvalues: the walk that turned bytes into text is jsontext's own now)"""
    assert render(_values({"k": [1, b"\xff", 1e300], "é": None})) == '{"k": [1, "\\\\xff", 1e300], "é": null}'
