"""Field types shared by the mapping sections, with the messages users see.

Canal binds YAML with Spring, which is lenient about scalars (``commitBatch: "3000"``,
``mapAll: "true"``, ``table: 2024``); these types accept the same, and reject anything
else with a short message that the loader prefixes with the file and the key.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, PrivateAttr, ValidationInfo

from sluice_common.errors import ConfigError


def _name(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"must be a name (a string), got {_kind(value)}")
    text = str(value).strip()
    if not text:
        raise ValueError("must not be empty")
    return text


def _optional_name(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _name(value)


def _text(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"must be a string, got {_kind(value)}")
    return str(value)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"must be true or false, got {_kind(value)}")


def _positive(value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"must be a positive integer, got {_kind(value)}")
    return value


def _list(value: Any) -> Any:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise ValueError(f"must be a list, got {_kind(value)}")
    return tuple(value)


def dict_or_empty(value: Any) -> Any:
    """A YAML mapping as is; null as {}; anything else a ValueError."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"must be a mapping (key: value), got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    """How a bad value is shown in a message: short, never the whole value."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"a {len(value)}-character string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


#: a table, column, index or field name (a YAML number is taken as its text)
Name = Annotated[str, BeforeValidator(_name)]
#: a name, or None for null / an empty string (canal's "same name as the key")
OptionalName = Annotated[str | None, BeforeValidator(_optional_name)]
#: any scalar, kept as text (SQL, conditions, separators)
Text = Annotated[str, BeforeValidator(_text)]
#: true / false (also the strings "true" / "false", as Spring accepts)
Flag = Annotated[bool, BeforeValidator(_flag)]
#: an integer > 0
PositiveInt = Annotated[int, BeforeValidator(_positive)]
#: a YAML list of names; a missing or empty value is ()
NameList = Annotated[tuple[Name, ...], BeforeValidator(_list)]
#: a YAML mapping name -> name; a null value means "the same name"
NameMap = Annotated[dict[Name, OptionalName], BeforeValidator(dict_or_empty)]


class Frozen(BaseModel):
    """Immutable, picklable, and strict about keys (an unknown key is an error)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Section(Frozen):
    """A kind-specific section (``dbMapping`` ...) that knows its file for later errors."""

    #: the top-level key this section lives under (for error messages)
    KEY: ClassVar[str] = ""
    _file: str = PrivateAttr("<mapping>")

    def _bind(self, info: ValidationInfo) -> None:
        self._file = (info.context or {}).get("file", "<mapping>")

    @property
    def file(self) -> str:
        """The mapping file this section was read from."""
        return self._file

    def fail(self, key: str | None, problem: str, *, hint: str | None = None) -> ConfigError:
        """A ConfigError for ``<KEY>.<key>`` in this section's file (raise it)."""
        where = f"{self.KEY}.{key}" if key else self.KEY
        return ConfigError(self._file, where, problem, hint=hint)


def same_name(a: str, b: str, case_insensitive: bool) -> bool:
    """Whether two identifiers are the same (MySQL table names may be case-insensitive)."""
    return a.casefold() == b.casefold() if case_insensitive else a == b


def listing(names: list[str] | tuple[str, ...], limit: int = 12) -> str:
    """``a, b, c`` — shortened with ``...`` past ``limit`` names."""
    shown = ", ".join(names[:limit])
    return shown + (", ..." if len(names) > limit else "") if names else "none"
