"""Durable file primitives for the batch store: atomic writes, no-overwrite publish, fsync.

Every file the store commits goes through :func:`write_atomic`: write a temp file in the
same directory, flush + fsync it, rename it into place, fsync the directory. A reader
therefore sees either the old state or the whole new file, never a prefix, and after
the directory fsync the rename survives a power loss too.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path

from sluice_common.errors import StoreError

TMP_SUFFIX = ".tmp"
_TMP_RE = re.compile(r"^\.(.+)\.\d+\.[0-9a-f]{8}\.tmp$")
# fsync on a directory is refused by a few network/FUSE file systems; nothing to do there.
_DIR_FSYNC_UNSUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF}
# a write the file system refused: full, over quota, read-only, or the disk failed it
_WRITE_FAILURES = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EACCES, errno.EPERM}
# os.link is refused by file systems without hard links; fall back to an existence check.
_LINK_UNSUPPORTED = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS}


def not_writable(path: Path | str, e: OSError, what: str = "the batch store") -> StoreError:
    """The one message for a store path this process cannot write (read-only, another owner, full,
    a failing disk)."""
    where = Path(e.filename) if getattr(e, "filename", None) else Path(path)
    reason = e.strerror or type(e).__name__
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        hint = (f"free space on the file system of {where} (or raise the quota), then run the command "
                "again: what it had not committed is written again, nothing committed is lost")
    elif e.errno == errno.EIO:
        hint = (f"the disk under {where} failed a write or an fsync: check the device (dmesg, SMART) and "
                "`sluice store verify` (committed files are whole; the failed one was not committed), "
                "then run the command again")
    else:
        hint = (f"check the owner and permissions of {where} (this process runs as uid {os.getuid()}) and that "
                "its file system is mounted read-write")
    return StoreError(f"{where}: cannot write {what} ({reason})", hint=hint)


def now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds, e.g. ``2026-05-09T07:35:25.123+00:00``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def fsync_dir(path: Path) -> None:
    """Make renames and unlinks in directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in _DIR_FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def temp_path(final: Path) -> Path:
    """A unique hidden temp name next to ``final`` (``.<name>.<pid>.<hex>.tmp``)."""
    return final.with_name(f".{final.name}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}")


def is_temp_name(name: str) -> bool:
    """True for names made by :func:`temp_path` (stray ones are left by a crash)."""
    return _TMP_RE.match(name) is not None


def write_temp(final: Path, data: bytes) -> Path:
    """Write ``data`` to a fresh temp file beside ``final``, fsync it, return its path. A full
    disk or a failed write or fsync raises :func:`not_writable`'s StoreError naming ``final``, and
    the temp file is gone (a failed fsync is never retried: the page cache may have dropped the
    data it could not write)."""
    tmp = temp_path(final)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as e:
        raise _failed_write(final, e) from None
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException as e:
        os.close(fd)
        _unlink_quiet(tmp)
        if isinstance(e, OSError):
            raise _failed_write(final, e) from None
        raise
    os.close(fd)
    return tmp


def _failed_write(final: Path, e: OSError) -> StoreError | OSError:
    """The StoreError for a write of ``final`` the file system refused; other errors as they are."""
    if e.errno in _WRITE_FAILURES:
        return not_writable(final, OSError(e.errno, e.strerror, str(final)))
    return e


def publish(tmp: Path, final: Path, *, overwrite: bool) -> None:
    """Rename ``tmp`` to ``final`` and fsync the directory.

    With ``overwrite=False`` an existing ``final`` is never replaced (hard link + unlink,
    which fails atomically if the name exists): a second writer on a mount whose locks
    do not work cannot silently replace a committed file.
    """
    try:
        if overwrite:
            os.replace(tmp, final)
        else:
            _publish_new(tmp, final)
    except BaseException as e:
        _unlink_quiet(tmp)
        if isinstance(e, OSError):
            raise _failed_write(final, e) from None
        raise
    try:
        fsync_dir(final.parent)
    except OSError as e:
        if not overwrite:  # not durable: a new file is taken back, so it was never committed
            _unlink_quiet(final)
        raise _failed_write(final.parent, e) from None


def _publish_new(tmp: Path, final: Path) -> None:
    try:
        os.link(tmp, final)
    except FileExistsError:
        raise StoreError(
            f"{final}: already exists; refusing to overwrite a committed file",
            hint="another process is writing to this store: check `sluice store status` "
            "and that the store's file system supports flock across hosts",
        ) from None
    except OSError as e:
        if e.errno not in _LINK_UNSUPPORTED:
            raise
        if final.exists():
            raise StoreError(f"{final}: already exists; refusing to overwrite a committed file") from None
        os.replace(tmp, final)
        return
    os.unlink(tmp)


def write_atomic(final: Path, data: bytes, *, overwrite: bool = True) -> None:
    """Atomically and durably make ``final`` contain exactly ``data``."""
    publish(write_temp(final, data), final, overwrite=overwrite)


def temp_target(name: str) -> str | None:
    """The final file name a temp file name was made for, or None if it is no temp name."""
    m = _TMP_RE.match(name)
    return m.group(1) if m else None


def remove_stray_temps(directory: Path, targets: set[str] | None = None) -> list[Path]:
    """Delete temp files (left by a crash) in ``directory``; only those for ``targets`` if given."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return removed
    for entry in entries:
        target = temp_target(entry.name)
        if target is not None and (targets is None or target in targets):
            _unlink_quiet(Path(entry.path))
            removed.append(Path(entry.path))
    if removed:
        fsync_dir(directory)
    return removed


def _unlink_quiet(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


#: characters Hadoop's glob reads as pattern syntax (Spark globs every path it is given to read)
_GLOB = re.compile(r"([\\{}\[\]*?])")


def spark_file_path(path: Path) -> str:
    """A local file as Spark reads it: ``file://`` and the absolute path as it is. Not a
    percent-encoded URI (``Path.as_uri()``): Hadoop's ``Path`` takes a string's ``%20`` as the
    three characters, so a store in ``my dir`` was looked for in ``my%20dir`` and every sync failed
    with 90 lines of Java stack. Glob characters are escaped with a backslash, which Hadoop's glob
    reads as "this character itself"."""
    return "file://" + _GLOB.sub(r"\\\1", str(Path(path).absolute()))
