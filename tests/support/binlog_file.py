"""Read a binlog *file* through capture's decoders and framer, as if a server streamed it.

:class:`FileDump` stands in for the dump connection (``BinlogReader.dump_class``): it serves the
file's events from ``start`` as the protocol's packets (an OK byte before each event, an EOF
packet at the end), with the checksum setting the file's format description names. Real binlog
files nobody here wrote (Debian's ``mariadb-test-data`` ships one MySQL 8.0 wrote) then run
through exactly the code a live capture runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.capture.position import Position
from pipeline.capture.reader import BinlogReader, ReaderOptions
from pipeline.capture.rowcodec import CodecCache
from pipeline.config import SourceConfig


def _packet(payload: bytes, seq: int) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq & 0xFF]) + payload


class FileDump:
    """A binlog file's events as dump packets (see the module docstring)."""

    path: Path

    def __init__(self, src: Any, flavor: str, start: Position, *, mode: str, follow: bool):
        self.start = start
        data = self.path.read_bytes()
        assert data[:4] == b"\xfebin", f"{self.path} is not a binlog file"
        fde_size = int.from_bytes(data[4 + 9:4 + 13], "little")
        self.checksum = data[4 + fde_size - 5] == 1   # the FDE's checksum algorithm byte: 1 = CRC32
        self.data = data
        self.done = False

    def open(self) -> None:
        pass

    def read(self) -> bytes:
        if self.done:
            raise AssertionError("read past the end of the file")
        out, pos, seq = [], 4, 1
        # the server's artificial rotate first, then the file's events from the start position
        name = self.start.logfile.encode()
        rotate_body = self.start.logpos.to_bytes(8, "little") + name
        rotate = (0).to_bytes(4, "little") + bytes([4]) + (1).to_bytes(4, "little") + \
            (19 + len(rotate_body) + (4 if self.checksum else 0)).to_bytes(4, "little") + (0).to_bytes(4, "little") + \
            (0x20).to_bytes(2, "little") + rotate_body + (b"\0\0\0\0" if self.checksum else b"")
        out.append(_packet(b"\0" + rotate, seq))
        while pos < len(self.data):
            size = int.from_bytes(self.data[pos + 9:pos + 13], "little")
            if pos == 4 or pos >= self.start.logpos:
                seq += 1
                out.append(_packet(b"\0" + self.data[pos:pos + size], seq))
            pos += size
        out.append(_packet(b"\xfe\0\0\2\0", seq + 1))
        self.done = True
        return b"".join(out)

    def close(self) -> None:
        pass


class NamedCodecs(CodecCache):
    """Column names for table maps written without them (``binlog_row_metadata=MINIMAL``, MySQL
    8.0's default), from ``{"db.table": [names]}``: capture refuses such table maps otherwise."""

    def __init__(self, names: dict[str, list[str]]):
        super().__init__()
        self.names = names

    def for_table_map(self, ev: Any):
        for c, name in zip(ev.columns, self.names[f"{ev.schema}.{ev.table}"], strict=True):
            c.name = name
        return super().for_table_map(ev)


def read_file(path: Path, names: dict[str, list[str]], *, flavor: str = "mysql", native: bool = True,
              start: int = 4) -> list[Any]:
    """Every capture item of the file at ``path`` (the framer's output)."""
    import os

    dump = type("Dump", (FileDump,), {"path": Path(path)})
    reader = type("FileReader", (BinlogReader,), {"dump_class": dump})
    old = os.environ.get("SLUICE_CAPTURE_NATIVE")
    os.environ["SLUICE_CAPTURE_NATIVE"] = "1" if native else "0"
    try:
        pos = Position(Path(path).name, start)
        return list(reader(SourceConfig(), flavor, pos, ReaderOptions(resume_by="file"), NamedCodecs(names)))
    finally:
        if old is None:
            os.environ.pop("SLUICE_CAPTURE_NATIVE", None)
        else:
            os.environ["SLUICE_CAPTURE_NATIVE"] = old
