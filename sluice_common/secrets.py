"""Passwords that never print: :class:`Secret` and where a password may come from."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic_core import core_schema

from sluice_common.errors import ConfigError


class Secret:
    """A password. ``str()``/``repr()`` show ``'***'``; ``.reveal()`` gives the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        """The real value: pass it to a driver, never to a log."""
        return self._value

    def utf8(self) -> bytes:
        """The value as UTF-8 bytes: what a MySQL/MariaDB server hashed at ``CREATE USER ... IDENTIFIED
        BY`` from a utf8mb4 session, and what the ``mariadb`` client sends. Drivers get these bytes,
        not the text: pymysql encodes a ``str`` password as Latin-1, so ``ü`` arrived as another byte
        string (access denied) and ``€`` could not be sent at all."""
        return self._value.encode("utf-8")

    def __repr__(self) -> str:
        return "Secret('***')" if self._value else "Secret('')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self):  # picklable for Spark executors
        return (Secret, (self._value,))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        def coerce(v: Any) -> Secret:
            if isinstance(v, Secret):
                return v
            if v is None:
                return Secret("")
            if isinstance(v, (str, int)):
                return Secret(str(v))
            raise ValueError("a password must be a string")

        return core_schema.no_info_plain_validator_function(
            coerce, serialization=core_schema.plain_serializer_function_ser_schema(lambda s: "***"))


def resolve_password(section: dict, file: str, where: str) -> Secret:
    """Take ``password`` | ``passwordFile`` | ``passwordEnv`` out of a config section."""
    given = [k for k in ("password", "passwordFile", "passwordEnv") if section.get(k) not in (None, "")]
    if len(given) > 1:
        raise ConfigError(file, f"{where}.{given[1]}", f"give only one of {', '.join(given)}")
    value = section.pop("password", None)
    pw_file = section.pop("passwordFile", None)
    pw_env = section.pop("passwordEnv", None)
    if pw_file:
        if not isinstance(pw_file, str):
            raise ConfigError(file, f"{where}.passwordFile", "must be a file path (a string)")
        try:
            value = Path(pw_file).read_text(encoding="utf-8").rstrip("\r\n")
        except (OSError, ValueError) as e:  # ValueError: NUL in the path, or not UTF-8
            why = getattr(e, "strerror", None) or type(e).__name__
            raise ConfigError(file, f"{where}.passwordFile", f"cannot read {pw_file!r}: {why}") from None
    elif pw_env:
        if not isinstance(pw_env, str):
            raise ConfigError(file, f"{where}.passwordEnv", "must be the name of an environment variable")
        if pw_env not in os.environ:
            raise ConfigError(file, f"{where}.passwordEnv", f"environment variable {pw_env} is not set")
        value = os.environ[pw_env]
    if isinstance(value, Secret):
        return value
    if isinstance(value, bool):  # YAML reads yes/no/on/off/true/false unquoted as a bool
        raise ConfigError(file, f"{where}.password", "YAML reads this value as true/false, not as text",
                          hint="put the password in quotes")
    if value is not None and not isinstance(value, (str, int)):
        raise ConfigError(file, f"{where}.password", "must be a string")
    return Secret("" if value is None else str(value))
