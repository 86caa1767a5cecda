"""Reading mapping files: YAML with line numbers in errors, duplicate keys refused, globs."""

from __future__ import annotations

import glob as globlib
import os
from collections.abc import Iterable
from pathlib import Path

import yaml

from pipeline.mapping.model import Mapping, parse_mapping
from sluice_common.errors import ConfigError

_GLOB_CHARS = set("*?[")


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key written twice in one mapping (YAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # unhashable: the base class reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in the same mapping", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_timestamp(self, node: yaml.ScalarNode):  # -> date | datetime
        """A date-like scalar that is no real date (``0000-0-0``) is a YAML error with its line."""
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError as e:
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is not a valid date or time ({e}); quote it to keep it as text",
                node.start_mark) from None


StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", StrictLoader.construct_yaml_timestamp)


def parse_mapping_text(text: str, file: str = "<mapping>") -> Mapping:
    """Parse the YAML text of a mapping file; errors name ``file`` (and the line)."""
    try:
        raw = yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError(file, None, f"{where}not valid YAML ({getattr(e, 'problem', None) or e})") from None
    except RecursionError:
        raise ConfigError(file, None, "not valid YAML (nested too deeply)") from None
    return parse_mapping(raw, file)


def read_text(path: Path, file: str, what: str) -> str:
    """The UTF-8 text of a config or mapping file; ConfigError naming ``file`` when it is missing,
    a directory, unreadable or not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(file, None, "file not found", hint=f"check the path ({path.absolute()})") from None
    except IsADirectoryError:
        hint = ("name the files, e.g. mappings/*.yml (a glob)" if what == "mapping"
                else "give the config file itself, e.g. --config /etc/sluice/shop.yml")
        raise ConfigError(file, None, f"is a directory, not a {what} file", hint=hint) from None
    except PermissionError:
        raise ConfigError(file, None, f"cannot read the {what} file (permission denied)",
                          hint=f"check its owner and permissions (this process runs as uid {os.getuid()})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(file, None, f"is not UTF-8 text (byte {e.start}: {e.reason})") from None
    except OSError as e:
        raise ConfigError(file, None, f"cannot read: {e.strerror or e}") from None


#: parsed mappings by (text, name shown): ``sluice run --follow`` loads every group's files each round,
#: and capture checks them too (pipeline/job/covered.py); a file read again parses again only if changed
_PARSED: dict[tuple[str, str], Mapping] = {}
_PARSED_MAX = 4096


def load_mapping(path: str | os.PathLike[str], *, display: str | None = None) -> Mapping:
    """Read and validate one mapping file; ``display`` is the name errors use (default: path)."""
    file = display or str(path)
    text = read_text(Path(path), file, "mapping")
    hit = _PARSED.get((text, file))
    if hit is None:
        hit = parse_mapping_text(text, file)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[(text, file)] = hit
    return hit


def load_mappings(paths_or_globs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
                  base_dir: str | os.PathLike[str] | None = None) -> tuple[Mapping, ...]:
    """Load every file named or matched, in the order given (glob matches sorted by name).

    Relative paths and globs are taken from ``base_dir`` (default: the current folder) and
    shown in errors as written. A file named twice is loaded once. A glob that matches no
    file is an error (a typo would otherwise silently map nothing).
    """
    if isinstance(paths_or_globs, str | os.PathLike):
        paths_or_globs = [paths_or_globs]
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    result, seen = [], set()
    for item in paths_or_globs:
        for shown, real in _expand(str(item), base):
            key = os.path.realpath(real)
            if key not in seen:
                seen.add(key)
                result.append(load_mapping(real, display=shown))
    return tuple(result)


def _expand(item: str, base: Path) -> list[tuple[str, Path]]:
    """``(name shown in errors, path to read)`` for a path or a glob."""
    absolute = os.path.isabs(item)
    if not _GLOB_CHARS & set(item):
        return [(item, Path(item) if absolute else base / item)]
    pattern = item if absolute else os.path.join(globlib.escape(str(base)), item)  # '[', '*' in the folder's name
    matches = sorted(p for p in globlib.glob(pattern, recursive=True) if os.path.isfile(p))
    if not matches:
        raise ConfigError(item, None, "no mapping file matches this pattern",
                          hint=f"looked in {base}" if not absolute else None)
    return [(p if absolute else os.path.relpath(p, base), Path(p)) for p in matches]
