"""Character sets and collations of replayed DDL: every character column of a mirrored table gets,
on a MySQL/MariaDB target, the collation the source gave it, under the name the target knows.

A ``CREATE TABLE`` names collations only where its author wrote them; every other column takes the
table's default, which takes the database's, and ``CHARSET x`` alone means the *server's* default
collation of ``x`` (``utf8mb4``: ``utf8mb4_0900_ai_ci`` on MySQL 8+, ``utf8mb4_general_ci`` on
MariaDB 10.11). Replayed as written, a MySQL table on MariaDB got MariaDB's defaults (PAD SPACE,
``ß`` = ``s``) and merged keys the source kept apart. So :func:`rewrite` makes the statement say
what the source understood:

* every ``COLLATE name`` the target does not know becomes its equivalent there (:func:`translate`),
  or the statement is refused by name;
* a ``CHARACTER SET`` / ``CHARSET x`` without a ``COLLATE`` in its clause gets the source's
  default collation of ``x`` (translated);
* a ``CREATE TABLE`` without a table-level charset or collation gets the source database's
  default (``DEFAULT CHARSET=... COLLATE=...`` after its column list), so its plain columns, and
  the columns later ``ALTER``\\ s add to it, take the source's effective collation.

Only at parenthesis depth 0 and 1 (clauses and column definitions): a ``CHARACTER SET`` inside
``CAST(...)`` takes no ``COLLATE``. The source's defaults (:class:`sluice_common.collations.SourceCharsets`)
are read from the source server by the job (pipeline/source/catalog.py: its database defaults and
charset defaults as they are when it runs).

:func:`translate` maps, where the target lacks a name, MySQL's NO PAD UCA 9.0.0 collations
(``*_0900_ai_ci``, ``_as_ci``, ``_as_cs``, the language ones, ``*_0900_bin``) and MariaDB's NO PAD
UCA 14.0.0 ones (``*_uca1400_[lang_]nopad_*``, ``*_nopad_bin``) onto each other: the same pad
attribute, accent and case sensitivity and language tailoring (the two UCA versions differ only for
characters Unicode added from 10.0 to 14.0). MariaDB's PAD SPACE ``uca1400`` collations become
MySQL's NO PAD ones (finer: never merges what the source keeps apart). Nothing else is guessed.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from sluice_common.collations import SourceCharsets
from sluice_common.errors import TargetMismatchError

#: MySQL's language codes of the 0900 collations and MariaDB's names of the same uca1400 tailorings
LANGUAGES = {"cs": "czech", "da": "danish", "de_pb": "german2", "eo": "esperanto", "es": "spanish",
             "es_trad": "spanish2", "et": "estonian", "hr": "croatian", "hu": "hungarian", "is": "icelandic",
             "la": "roman", "lt": "lithuanian", "lv": "latvian", "pl": "polish", "ro": "romanian", "sk": "slovak",
             "sl": "slovenian", "sv": "swedish", "tr": "turkish", "vi": "vietnamese"}
_CODES = {v: k for k, v in LANGUAGES.items()}
_LEVELS = "ai_ci|as_ci|as_cs"
_MYSQL_UCA = re.compile(rf"^(?P<cs>[a-z0-9]+)_(?:(?P<lang>[a-z_]+?)_)?0900_(?P<lvl>{_LEVELS}|bin)$")
_MARIA_UCA = re.compile(rf"^(?P<cs>[a-z0-9]+)_uca1400_(?:(?P<lang>[a-z0-9]+)_)?(?P<pad>nopad_)?(?P<lvl>{_LEVELS})$")
_MARIA_NOPAD_BIN = re.compile(r"^(?P<cs>[a-z0-9]+)_nopad_bin$")


def candidates(name: str) -> list[str]:
    """Names of collations that compare like ``name`` (or finer, never coarser) on the other flavour."""
    n = name.lower()
    m = _MYSQL_UCA.match(n)
    if m:
        cs, lang, lvl = m.group("cs"), m.group("lang"), m.group("lvl")
        if lvl == "bin":
            return [] if lang else [f"{cs}_nopad_bin"]
        if lang and lang not in LANGUAGES:
            return []
        return [f"{cs}_uca1400_{LANGUAGES[lang] + '_' if lang else ''}nopad_{lvl}"]
    m = _MARIA_UCA.match(n)
    if m:
        cs, lang, lvl = m.group("cs"), m.group("lang"), m.group("lvl")
        if lang and lang not in _CODES:
            return []
        return [f"{cs}_{_CODES[lang] + '_' if lang else ''}0900_{lvl}"]
    m = _MARIA_NOPAD_BIN.match(n)
    return [f"{m.group('cs')}_0900_bin"] if m else []


def translate(name: str, have: frozenset[str]) -> str | None:
    """``name`` if the target has it, else its equivalent there (:func:`candidates`), else None. A
    ``utf8_*`` name is the alias MariaDB 10.6+ and MySQL 8 keep for ``utf8mb3_*`` (information_schema
    lists only the latter): kept as written when the target has the ``utf8mb3_*`` collation, so the
    target reads the alias as the source did (both by their default ``old_mode``/charset rules)."""
    n = name.lower()
    if n in have or (n.startswith("utf8_") and "utf8mb3_" + n[5:] in have):
        return name
    return next((c for c in candidates(name) if c in have), None)


_names: dict[Any, frozenset[str]] = {}
_names_lock = threading.Lock()


def target_collations(cur, key: Any) -> frozenset[str]:
    """Every collation name the target knows (lower-case; MariaDB's full ``utf8mb4_uca1400_*`` names
    too), cached per target ``key``; ``cur``: a DB-API cursor on the target."""
    with _names_lock:
        if key in _names:
            return _names[key]
    cur.execute("SELECT COLLATION_NAME FROM information_schema.COLLATIONS")
    names = {r[0].lower() for r in cur.fetchall()}
    cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'information_schema' "
                "AND TABLE_NAME = 'COLLATION_CHARACTER_SET_APPLICABILITY' AND COLUMN_NAME = 'FULL_COLLATION_NAME'")
    if cur.fetchall():  # MariaDB 10.10+: utf8mb4_uca1400_ai_ci is the full name of uca1400_ai_ci
        cur.execute("SELECT FULL_COLLATION_NAME FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY")
        names |= {r[0].lower() for r in cur.fetchall()}
    with _names_lock:
        _names[key] = frozenset(names)
    return _names[key]


# -- the statement rewrite ----------------------------------------------------------------------
_TOKEN = re.compile(r"""
    (?P<bq>`(?:[^`]|``)*`)
  | (?P<sq>'(?:[^'\\]|\\.|'')*')
  | (?P<dq>"(?:[^"\\]|\\.|"")*")
  | (?P<comment>/\*.*?\*/|--[ \t][^\n]*|\#[^\n]*)
  | (?P<word>[A-Za-z0-9_$\u0080-\U0010FFFF]+)
  | (?P<other>\s+|.)
""", re.S | re.X)


@dataclass
class _Tok:
    kind: str
    text: str
    depth: int  # parenthesis depth before this token

    @property
    def word(self) -> str:
        return self.text.upper() if self.kind == "word" else ""

    @property
    def name(self) -> str:
        """The identifier or string this token spells (unquoted)."""
        if self.kind in ("bq", "sq", "dq"):
            return self.text[1:-1].replace(self.text[0] * 2, self.text[0])
        return self.text


def _tokens(sql: str) -> list[_Tok]:
    out, depth = [], 0
    for m in _TOKEN.finditer(sql):
        out.append(_Tok(m.lastgroup or "other", m.group(), depth))
        depth += {"(": 1, ")": -1}.get(m.group(), 0) if m.lastgroup == "other" else 0
    return out


def _significant(toks: list[_Tok], i: int) -> int:
    """The index of the next token from ``i`` that is not space or a comment (len when none)."""
    while i < len(toks) and (toks[i].kind == "comment" or (toks[i].kind == "other" and toks[i].text.isspace())):
        i += 1
    return i


def _name_after(toks: list[_Tok], i: int) -> int:
    """The index of the name after a CHARSET/COLLATE keyword at ``i`` (skipping ``=``)."""
    j = _significant(toks, i + 1)
    if j < len(toks) and toks[j].text == "=":
        j = _significant(toks, j + 1)
    return j


def _clause_has_collate(toks: list[_Tok], i: int, depth: int) -> bool:
    """A COLLATE at ``depth`` before the clause that holds ``i`` ends (a comma or ``)`` there)."""
    for t in toks[i:]:
        if t.depth < depth or (t.depth == depth and t.text in (",", ")")):
            return False
        if t.depth == depth and t.word == "COLLATE":
            return True
    return False


def rewrite(sql: str, kind: str, database: str, source: SourceCharsets | None, have: frozenset[str],
            table: str = "") -> str:
    """``sql`` (a replayed CREATE/ALTER of ``database``) with every implicit collation made explicit
    as the source understood it and every collation named as the target knows it (module docstring).
    Without ``source`` (no driver), only the names are translated. TargetMismatchError names a
    collation the target has no equivalent of."""
    toks = _tokens(sql)
    words = [t.word for t in toks if t.depth == 0 and t.kind == "word"]
    select = "SELECT" in words
    inserts: dict[int, str] = {}

    def target_name(name: str, what: str) -> str:
        got = translate(name, have)
        if got is None:
            raise TargetMismatchError(
                f"replaying {kind} of {database}.{table or '?'}: the target has no collation that compares like "
                f"the source's {name} ({what})", hint="use a target server that has it (for MySQL's *_0900_* "
                "collations, MariaDB 10.10 or later), or mirror into a target of the source's flavour")
        return got

    for i, t in enumerate(toks):
        if t.word == "COLLATE":
            j = _name_after(toks, i)
            if j < len(toks) and toks[j].kind in ("word", "bq", "sq", "dq"):
                new = target_name(toks[j].name, "named in the statement")
                if new != toks[j].name:
                    toks[j].text = f"`{new}`" if toks[j].kind == "bq" else new
        elif t.word in ("CHARSET", "CHARACTER", "CHAR") and source is not None and t.depth <= 1 and not select:
            k = i
            if t.word != "CHARSET":
                k = _significant(toks, i + 1)
                if k >= len(toks) or toks[k].word != "SET":
                    continue
            j = _name_after(toks, k)
            if j >= len(toks) or toks[j].kind not in ("word", "bq", "sq", "dq") or toks[j].word in ("DEFAULT",):
                continue
            cs = toks[j].name.lower()
            if cs != "binary" and not _clause_has_collate(toks, j + 1, t.depth):
                default = source.charsets.get(cs)
                if default is None:
                    continue  # a charset the source does not have: the statement failed there too
                inserts[j] = f" COLLATE {target_name(default, f'the source default of {cs}')}"
    if kind == "CREATE" and source is not None and not select:
        at = _table_defaults_at(toks)
        if at is not None and database in source.databases:
            cs, coll = source.databases[database]
            inserts[at] = inserts.get(at, "") + (f" DEFAULT CHARSET={cs} COLLATE="
                                                 f"{target_name(coll, f'the default of database {database}')}")
    return "".join(t.text + inserts.get(i, "") for i, t in enumerate(toks))


def _table_defaults_at(toks: list[_Tok]) -> int | None:
    """The index of the ``)`` that closes a CREATE TABLE's column list when no table option at depth
    0 names a charset or collation (else None; also for ``CREATE TABLE ... LIKE``)."""
    opened = next((i for i, t in enumerate(toks) if t.depth == 0 and t.text == "("), None)
    if opened is None:
        return None
    first = _significant(toks, opened + 1)
    if first < len(toks) and toks[first].word == "LIKE":
        return None
    close = next((i for i in range(opened + 1, len(toks)) if toks[i].depth == 1 and toks[i].text == ")"), None)
    if close is None:
        return None
    tail = [t.word for t in toks[close + 1:] if t.depth == 0]
    if {"CHARSET", "CHARACTER", "COLLATE"} & set(tail):
        return None
    return close
