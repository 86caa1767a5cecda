"""Python codecs for the source's character sets, decoding each byte as the server converts it.

A column's text is decoded with the codec of its MySQL character set (the table map names the
collation). Python's codec of the same name is not always the server's:

* the Unicode sets are big-endian in MySQL (``utf16``, ``utf32``, ``ucs2``); Python's ``utf-16``
  and ``utf-32`` read a text without a BOM as little-endian, so every character came out swapped
  (a new user's probe: ``'héllo'`` stored as ``'栀氀氀漀'``), and Python has no ``ucs2`` or ``utf16le``
  (capture stopped with ``LookupError``);
* the single-byte sets differ in places (MySQL's ``latin1`` is cp1252 with the five bytes Windows
  leaves undefined mapped to U+0081..U+009D; its ``greek``, ``hebrew``, ``cp866``, ``koi8u``,
  ``cp1256`` are not ISO's or Python's at a few bytes), and Python has no ``dec8``, ``armscii8``,
  ``swe7``, ``hp8``, ``keybcs2``, ``geostd8``, ``macce``.

So capture asks the server (:func:`learn`, once per process) how it converts each of the 256
bytes of every single-byte set (``CONVERT(... USING utf32)``) and decodes with that table; a byte
the server has no character for (it gives ``?`` or U+FFFD) stays visible as ``\\xNN``, as any
undecodable byte does. ``latin1`` has its fixed table (the native decoder's too) without asking.
A multi-byte set other than the Unicode ones is decoded by Python's codec of that name (big5,
cp932, euckr, gb2312, gbk, gb18030, sjis, ujis); one Python has none for (``eucjpms``) is refused
by name (:func:`codec_for`).
"""

from __future__ import annotations

import codecs
import threading
from typing import Any

from sluice_common.errors import SourceError

#: MySQL's Unicode character sets -> Python's codec of the same byte order
_UNICODE = {"utf8": "utf-8", "utf8mb3": "utf-8", "utf8mb4": "utf-8", "utf16": "utf-16-be",
            "utf16le": "utf-16-le", "utf32": "utf-32-be", "ucs2": "utf-16-be"}
#: the prefix of the codecs registered here (a name Python's own codecs do not use)
PREFIX = "sluice_mysql_"
#: MySQL's latin1: cp1252, its five undefined bytes as the C1 controls of the same number
_LATIN1 = "".join(chr(b) if b < 0x80 or b >= 0xA0 or b in (0x81, 0x8D, 0x8F, 0x90, 0x9D)
                  else bytes([b]).decode("cp1252") for b in range(256))
_UNDEFINED = "\ufffe"  # charmap_decode's "no character" mark

_tables: dict[str, str] = {"latin1": _LATIN1}
_lock = threading.Lock()
_learned: dict[Any, dict[str, str]] = {}  # server -> its tables


def _search(name: str) -> codecs.CodecInfo | None:
    charset = name[len(PREFIX):]
    if not name.startswith(PREFIX) or charset not in _tables:
        return None

    def decode(data: bytes, errors: str = "strict") -> tuple[str, int]:
        # the table of the server learned last (Python caches this CodecInfo by name for good)
        return codecs.charmap_decode(data, errors, _tables[charset])

    def encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
        return codecs.charmap_encode(text, errors, codecs.charmap_build(_tables[charset].replace(_UNDEFINED, "\x00")))
    return codecs.CodecInfo(encode, decode, name=name)


codecs.register(_search)


def learn(conn: Any, key: Any = None) -> None:
    """Read the server's table of every single-byte character set (one query; once per ``key``,
    the server's identity, per process); the tables of the server learned last decode (a process
    captures from one source at a time)."""
    with _lock:
        if key in _learned:
            _tables.update(_learned[key])  # this server's, again (another may have been read since)
            return
    with conn.cursor() as cur:
        cur.execute("SELECT CHARACTER_SET_NAME FROM information_schema.CHARACTER_SETS WHERE MAXLEN = 1 "
                    "AND CHARACTER_SET_NAME NOT IN ('binary', 'latin1')")
        names = [r[0] for r in cur.fetchall() if str(r[0]).isidentifier()]
        every = bytes(range(256)).hex()
        found: dict[str, str] = {}
        if names:
            cur.execute(" UNION ALL ".join(
                f"SELECT '{n}', HEX(CONVERT(CONVERT(UNHEX('{every}') USING {n}) USING utf32))" for n in names))
            for name, text in cur.fetchall():
                points = [int(text[i:i + 8], 16) for i in range(0, len(text or ""), 8)]
                if len(points) == 256:
                    found[name] = "".join(_UNDEFINED if (p == 0x3F and b != 0x3F) or p == 0xFFFD else chr(p)
                                          for b, p in enumerate(points))
    with _lock:
        _tables.update(found)
        _learned[key] = found


def codec_for(charset: str | None, library_name: str | None, column: str, table: str) -> str | None:
    """The Python codec that decodes column ``column`` of ``table`` in MySQL character set ``charset``
    (None: binary). ``library_name``: python-mysql-replication's codec name for it."""
    if charset is None or charset == "binary":
        return None if charset == "binary" else (library_name or "utf-8")
    if charset in _UNICODE:
        return _UNICODE[charset]
    if charset in _tables:
        return PREFIX + charset
    for name in (library_name, charset):  # never utf-8 for a set outside _UNICODE: a guess
        try:
            if name and codecs.lookup(name).name != "utf-8":
                return name
        except LookupError:
            continue
    raise SourceError(f"column {column} of {table} is in character set {charset}, which capture cannot decode "
                      "(Python has no codec for it, nor did the server give its table)",
                      hint=f"convert the column at the source (ALTER TABLE {table} MODIFY {column} ... CHARACTER "
                           f"SET utf8mb4), or leave {table} out of capture (source.filter.exclude)")
