"""Turning pydantic's validation errors into one ConfigError naming the file and the key.

Also knows the keys of canal adapters Sluice does not support, so that a kudu, phoenix or
tablestore mapping is refused with a message that says so rather than "unknown key".
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from sluice_common.errors import ConfigError

#: sections of canal mapping files for adapters Sluice does not have
UNSUPPORTED_SECTIONS = {
    "kuduMapping": "canal's kudu adapter",
    "clickhouseMapping": "canal's clickhouse adapter",
    "tablestoreMapping": "canal's tablestore adapter",
    "phoenixMapping": "canal's phoenix adapter",
}
#: keys canal accepts in some adapter but Sluice does not implement: (section, key) -> why
FOREIGN_KEYS = {
    ("", "threads"): "a key of canal's tablestore adapter",
    ("", "updateChangeColumns"): "a key of canal's tablestore adapter",
    ("dbMapping", "escapeUpper"): "a key of canal's phoenix adapter",
    ("dbMapping", "alter"): "a key of canal's phoenix adapter (schema changes)",
    ("dbMapping", "drop"): "a key of canal's phoenix adapter (schema changes)",
    ("dbMapping", "skipMissing"): "a key of canal's phoenix adapter",
    ("dbMapping", "limit"): "a key of canal's phoenix adapter",
    ("esMapping", "syncByTimestamp"): "canal's timed re-sync, which Sluice does not do",
    ("esMapping", "syncInterval"): "canal's timed re-sync, which Sluice does not do",
}
_PLAIN = {
    "missing": "is required",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "dict_type": "must be a mapping (key: value)",
    "model_type": "must be a mapping (key: value)",
    "model_attributes_type": "must be a mapping (key: value)",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
}


def error_key(loc: tuple[Any, ...]) -> str:
    """``('dbMapping', 'targetPk', 0)`` -> ``dbMapping.targetPk[0]`` (a dict-key marker is dropped)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def to_config_error(err: ValidationError, file: str, root: type[BaseModel]) -> ConfigError:
    """The first (most useful) problem of ``err`` as a ConfigError; unknown keys come first."""
    errors = sorted(err.errors(), key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    loc = tuple(first["loc"])
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    hint = None
    if first["type"] == "extra_forbidden":
        section = ".".join(str(p) for p in loc[:-1])
        why = FOREIGN_KEYS.get((section, str(loc[-1])))
        problem = f"unknown key ({why}; not supported by Sluice)" if why else "unknown key"
        known = known_keys(root, loc[:-1])
        if known and not why:
            hint = "known keys here: " + ", ".join(known)
    elif "[key]" in loc:
        problem = "keys here must be names (strings)"
    elif first["type"] == "value_error":
        problem = str(first["msg"]).removeprefix("Value error, ")
    elif first["type"] == "literal_error":
        problem = f"must be one of {first.get('ctx', {}).get('expected', '')}"
    else:
        problem = _PLAIN.get(first["type"], str(first["msg"]))
    return ConfigError(file, error_key(loc) or None, problem + more, hint=hint)


def known_keys(root: type[BaseModel], path: tuple[Any, ...]) -> list[str]:
    """The keys the model at ``path`` (below ``root``) accepts, as written in YAML."""
    cur: Any = root
    for part in path:
        cur = _unwrap(cur)
        if isinstance(cur, type) and issubclass(cur, BaseModel):
            fields = {f.alias or name: f for name, f in cur.model_fields.items()}
            if part not in fields:
                return []
            cur = fields[part].annotation
        elif get_origin(cur) is dict:
            cur = get_args(cur)[1]
        else:
            return []
    cur = _unwrap(cur)
    if isinstance(cur, type) and issubclass(cur, BaseModel):
        return [f.alias or name for name, f in cur.model_fields.items()]
    return []


def _unwrap(tp: Any) -> Any:
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            tp = next((a for a in get_args(tp) if a is not type(None)), tp)
            if get_origin(tp) in (Union, types.UnionType):
                return tp
        else:
            return tp
