"""The pure-Python binlog decoder: the same events as the native one, without the extension.

:class:`PyStream` has the native ``sluice_binlog.Stream``'s interface (``feed``, ``items``,
``set_table``, ``waiting_for``, ``buffered``) and emits the same :mod:`events`, field for field:
packets framed (16 MB continuations joined), event headers and checksums, MySQL transaction
payloads unpacked (zstd), MariaDB compressed events inflated (zlib), table maps compared by their
bytes. It never decodes row images itself: every stored table's rows come back raw
(:class:`~pipeline.capture.events.RawRowsEv`) and its ``TableCodec`` decodes them. Capture runs on
it when the native extension is not built or ``SLUICE_CAPTURE_NATIVE=0`` (a tenth of the speed).
"""

from __future__ import annotations

import zlib

from .events import (
    DELETE,
    INSERT,
    UPDATE,
    AnnotateEv,
    EndEv,
    Event,
    FormatEv,
    GtidEv,
    HeartbeatEv,
    OtherEv,
    QueryEv,
    RawRowsEv,
    RotateEv,
    ServerErrorEv,
    SkippedRowsEv,
    TableMapEv,
    XaPrepareEv,
    XidEv,
    xid_key,
)

_SKIP, _RAW = 0, 2
_ROWS_KIND = {23: INSERT, 30: INSERT, 166: INSERT, 169: INSERT, 24: UPDATE, 31: UPDATE, 39: UPDATE, 167: UPDATE,
              170: UPDATE, 25: DELETE, 32: DELETE, 168: DELETE, 171: DELETE}
_ROWS_V2 = frozenset({30, 31, 32, 39, 169, 170, 171})


class DecodeError(ValueError):
    """The stream holds bytes that are not a binlog event this decoder understands."""


def _le(b: bytes) -> int:
    return int.from_bytes(b, "little")


def lenenc(b: bytes, pos: int) -> tuple[int, int]:
    """A length-encoded (packed) integer at ``pos``: (value, next position)."""
    if pos >= len(b):
        raise DecodeError("truncated length")
    first = b[pos]
    if first <= 250:
        return first, pos + 1
    n = {252: 2, 253: 3, 254: 8}.get(first)
    if n is None or pos + 1 + n > len(b):
        raise DecodeError("bad length-encoded integer")
    return _le(b[pos + 1:pos + 1 + n]), pos + 1 + n


def mariadb_uncompress(b: bytes) -> bytes:
    """A MariaDB ``log_bin_compress`` record: header byte, big-endian length, zlib data."""
    if not b or not b[0] & 0x80:
        raise DecodeError("a compressed event without its compression header")
    if (b[0] & 0x70) >> 4:
        raise DecodeError(f"compressed event with unknown algorithm {(b[0] & 0x70) >> 4}")
    n = b[0] & 0x07
    if not 1 <= n <= 4 or len(b) < 1 + n:
        raise DecodeError("bad compressed event header")
    size = int.from_bytes(b[1:1 + n], "big")
    try:
        out = zlib.decompress(b[1 + n:])
    except zlib.error as e:
        raise DecodeError(f"compressed event does not inflate: {e}") from None
    if len(out) != size:
        raise DecodeError(f"compressed event inflates to {len(out)} bytes, its header says {size}")
    return out


def unpack_payload(body: bytes) -> bytes:
    """The events of a MySQL transaction payload (see ``native/src/events.rs``)."""
    pos, size, ctype, usize = 0, None, None, None
    while True:
        field, pos = lenenc(body, pos)
        if field == 0:
            break
        length, pos = lenenc(body, pos)
        if field in (1, 2, 3):
            value, pos = lenenc(body, pos)
            if field == 1:
                size = value
            elif field == 2:
                ctype = value
            else:
                usize = value
        else:
            pos += length
    if size is None or ctype is None:
        raise DecodeError("transaction payload without its size or compression type")
    payload = body[pos:pos + size]
    if len(payload) < size:
        raise DecodeError("transaction payload shorter than its size")
    if ctype == 255:
        data = payload
    elif ctype == 0:
        import zstandard

        try:
            data = zstandard.ZstdDecompressor().decompressobj().decompress(payload)
        except zstandard.ZstdError as e:
            raise DecodeError(f"transaction payload does not decompress: {e}") from None
    else:
        raise DecodeError(f"transaction payload compressed with unknown type {ctype}")
    if usize is not None and usize != len(data):
        raise DecodeError(f"transaction payload decompresses to {len(data)} bytes, its header says {usize}")
    return data


class PyStream:
    """Frames and parses a dump connection's bytes into :mod:`events` (see the module docstring)."""

    def __init__(self, checksum: bool):
        self.checksum = checksum
        self._buf = bytearray()
        self._off = 0
        self._tables: dict[int, list] = {}        # table id -> [body bytes, state]
        self._waiting: int | None = None
        self._inner: list | None = None           # [data, offset, start, next] of a payload

    def feed(self, data: bytes) -> None:
        if self._off and self._off * 2 >= len(self._buf):
            del self._buf[:self._off]
            self._off = 0
        self._buf += data

    def buffered(self) -> int:
        return len(self._buf) - self._off

    def waiting_for(self) -> int | None:
        return self._waiting

    def set_table(self, table_id: int, mode: int, name: str, ops=None, keys=None) -> None:
        """``mode`` 0 skip; anything else: raw rows to Python (this decoder has no native plans)."""
        t = self._tables.get(table_id)
        if t is not None:
            t[1] = _SKIP if mode == 0 else _RAW
        if self._waiting == table_id:
            self._waiting = None

    def _packet(self) -> bytes | None:
        buf, at, parts = self._buf, self._off, []
        while True:
            if len(buf) < at + 4:
                return None
            n = _le(buf[at:at + 3])
            if len(buf) < at + 4 + n:
                return None
            parts.append(bytes(buf[at + 4:at + 4 + n]))
            at += 4 + n
            if n < 0xFFFFFF:
                break
        self._off = at
        return b"".join(parts)

    def items(self, limit: int) -> list[Event]:
        """Up to ``limit`` events; stops after a table map that ``set_table`` must decide first."""
        out: list[Event] = []
        while len(out) < limit and self._waiting is None:
            if self._inner is not None:
                self._inner_event(out)
                continue
            pkt = self._packet()
            if pkt is None:
                break
            head = pkt[:1]
            if head == b"\xfe" and len(pkt) < 9:
                out.append(EndEv())
                break
            if head == b"\xff":
                code = _le(pkt[1:3]) if len(pkt) >= 3 else 0
                msg = pkt[3:]
                if msg[:1] == b"#" and len(msg) >= 6:
                    msg = msg[6:]
                out.append(ServerErrorEv(code, msg.decode("utf-8", "replace")))
                break
            if head != b"\x00":
                raise DecodeError("unexpected packet in the binlog stream")
            ev = pkt[1:]
            if len(ev) < 19:
                raise DecodeError("binlog event shorter than its header")
            etype, size, nxt = ev[4], _le(ev[9:13]), _le(ev[13:17])
            end = len(ev) - 4 if self.checksum and etype != 15 and len(ev) >= 23 else len(ev)
            self._dispatch(ev, ev[19:end], max(nxt - size, 0), nxt, True, out)
        return out

    def _inner_event(self, out: list[Event]) -> None:
        data, off, start, nxt = self._inner
        if off >= len(data):
            self._inner = None
            return
        if off + 19 > len(data):
            raise DecodeError("transaction payload ends inside an event header")
        size = _le(data[off + 9:off + 13])
        if size < 19 or off + size > len(data):
            raise DecodeError("transaction payload holds an event that overruns it")
        ev = data[off:off + size]
        self._inner[1] = off + size
        if off + size >= len(data):
            self._inner = None
        self._dispatch(ev, ev[19:], start, nxt, False, out)

    def _dispatch(self, ev: bytes, body: bytes, start: int, nxt: int, outer: bool, out: list[Event]) -> None:
        ts, etype, server_id = _le(ev[0:4]), ev[4], _le(ev[5:9])
        if etype == 19:
            table_id = _le(body[0:6])
            t = self._tables.get(table_id)
            if t is None or t[0] != body:
                self._tables[table_id] = [body, None]
                self._waiting = table_id
                out.append(TableMapEv(table_id, self._table_packet(ev, outer), ts, start, nxt))
        elif etype in _ROWS_KIND:
            self._rows(etype, body, ts, start, nxt, out)
        elif etype == 16:
            out.append(XidEv(ts, start, nxt))
        elif etype in (2, 18, 165):  # 18: EXECUTE_LOAD_QUERY (statement-format LOAD DATA), 13 more post-header bytes
            post = 26 if etype == 18 else 13
            if len(body) < post:
                raise DecodeError("short query event")
            s = post + _le(body[11:13])
            schema = body[s:s + body[8]]
            text = body[s + body[8] + 1:]
            out.append(QueryEv(ts, start, nxt, schema, mariadb_uncompress(text) if etype == 165 else text,
                               body[post:s]))
        elif etype == 162:
            out.append(self._mariadb_gtid(body, ts, start, nxt, server_id))
        elif etype == 33:
            if len(body) < 25:
                raise DecodeError("short GTID event")
            h = body[1:17].hex()
            uuid = f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
            out.append(GtidEv(ts, start, nxt, f"{uuid}:{_le(body[17:25])}", 0, False, None))
        elif etype == 38:
            if len(body) < 13:
                raise DecodeError("short XA PREPARE event")
            g, b = _le(body[5:9]), _le(body[9:13])
            if g > 64 or b > 64 or len(body) < 13 + g + b:
                raise DecodeError("bad XA PREPARE event")
            fmt = int.from_bytes(body[1:5], "little", signed=True)
            xid = xid_key(fmt, body[13:13 + g], body[13 + g:13 + g + b])
            out.append(XaPrepareEv(ts, start, nxt, body[0] != 0, xid))
        elif etype == 40:
            if not outer:
                raise DecodeError("a transaction payload inside a transaction payload")
            self._inner = [unpack_payload(body), 0, start, nxt]
        elif etype == 4:
            if len(body) < 8:
                raise DecodeError("short rotate event")
            out.append(RotateEv(ts, _le(body[0:8]), body[8:].decode("utf-8", "replace")))
        elif etype == 160:
            out.append(AnnotateEv(ts, body))
        elif etype == 29:
            out.append(AnnotateEv(ts, body[1:]))
        elif etype in (27, 41):
            out.append(HeartbeatEv(ts, nxt))
        elif etype == 15:
            raw = body[2:52]
            out.append(FormatEv(ts, start, nxt, raw.split(b"\0", 1)[0].decode("utf-8", "replace")))
        else:
            out.append(OtherEv(etype, ts, start, nxt))

    @staticmethod
    def _mariadb_gtid(body: bytes, ts: int, start: int, nxt: int, server_id: int) -> GtidEv:
        if len(body) < 13:
            raise DecodeError("short GTID event")
        seq, domain, flags = _le(body[0:8]), _le(body[8:12]), body[12]
        p = 13 + (8 if flags & 0x02 else 0)
        xid = None
        if flags & 0xC0:
            if len(body) < p + 6:
                raise DecodeError("short XA GTID event")
            g, b = body[p + 4], body[p + 5]
            data = body[p + 6:p + 6 + g + b]
            if len(data) < g + b:
                raise DecodeError("short XA GTID event")
            xid = xid_key(int.from_bytes(body[p:p + 4], "little", signed=True), data[:g], data[g:])
        return GtidEv(ts, start, nxt, f"{domain}-{server_id}-{seq}", flags, True, xid)

    def _table_packet(self, ev: bytes, outer: bool) -> bytes:
        if outer or not self.checksum:
            return b"\0" + ev
        return b"\0" + ev[:9] + (len(ev) + 4).to_bytes(4, "little") + ev[13:] + b"\0\0\0\0"

    def _rows(self, etype: int, body: bytes, ts: int, start: int, nxt: int, out: list[Event]) -> None:
        kind = _ROWS_KIND[etype]
        if len(body) < 8:
            raise DecodeError("short rows event")
        table_id, flags = _le(body[0:6]), _le(body[6:8])
        pos = 8 + max(_le(body[8:10]), 2) if etype in _ROWS_V2 else 8
        ncols, p = lenenc(body, pos)
        nb = (ncols + 7) // 8
        present = body[p:p + nb]
        p += nb
        present2 = None
        if kind == UPDATE:
            present2 = body[p:p + nb]
            p += nb
        if len(present) < nb or (present2 is not None and len(present2) < nb):
            raise DecodeError("short rows event")
        t = self._tables.get(table_id)
        if t is None or t[1] == _SKIP:
            out.append(SkippedRowsEv(ts, start, nxt))
            return
        if t[1] is None:
            raise DecodeError(f"rows event for table id {table_id} before its plan")
        rows = body[p:]
        if etype >= 166:
            rows = mariadb_uncompress(rows)
        out.append(RawRowsEv(kind, table_id, ts, start, nxt, rows, present, present2, flags, etype == 39))
