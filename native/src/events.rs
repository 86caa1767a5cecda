//! The replication stream: MySQL packet framing (including 16 MB continuation packets),
//! binlog event headers, and the events capture reads. Rows events of a table whose plan is
//! known are decoded here to JSON (`rows.rs`); table maps are compared by their bytes, and only
//! a table map whose bytes are new for its table id goes back to Python to be parsed.

use std::collections::HashMap;
use std::io::Read;

use crate::rows::{decode_rows, Plan};

pub const ROWS_INSERT: u8 = 0;
pub const ROWS_UPDATE: u8 = 1;
pub const ROWS_DELETE: u8 = 2;

/// One thing found in the stream, in stream order: one per binlog event (see
/// `pipeline/capture/events.py`, whose named tuples `lib.rs` builds from these).
pub enum Item {
    Rows { kind: u8, table_id: u64, ts: u32, start: u64, next: u64, nrows: usize, data: Vec<u8>,
           old: Option<Vec<u8>>, size: usize, flags: u16, present: Vec<u8>, present2: Option<Vec<u8>> },
    RowsRaw { kind: u8, table_id: u64, ts: u32, start: u64, next: u64, rows: Vec<u8>, present: Vec<u8>,
              present2: Option<Vec<u8>>, flags: u16, partial_json: bool },
    RowsSkip { ts: u32, start: u64, next: u64 },
    TableMap { table_id: u64, packet: Vec<u8>, ts: u32, start: u64, next: u64 },
    Gtid { ts: u32, start: u64, next: u64, gtid: String, flags: u8, mariadb: bool, xid: Option<Vec<u8>> },
    Xid { ts: u32, start: u64, next: u64 },
    Query { ts: u32, start: u64, next: u64, schema: Vec<u8>, query: Vec<u8>, status: Vec<u8> },
    XaPrepare { ts: u32, start: u64, next: u64, one_phase: bool, xid: Vec<u8> },
    Rotate { ts: u32, pos: u64, file: String },
    Annotate { ts: u32, sql: Vec<u8> },
    Heartbeat { ts: u32, next: u64 },
    Format { ts: u32, start: u64, next: u64, server_version: String },
    Other { type_code: u8, ts: u32, start: u64, next: u64 },
    Eof,
    Err { code: u16, msg: String },
}

/// What Python decided for a table id.
pub enum TableState {
    Pending,
    Skip,
    Native(Plan),
    Raw,
}

pub struct Table {
    body: Vec<u8>,
    pub state: TableState,
}

/// The events of a MySQL transaction payload, decompressed, being handed out one by one (a new
/// table map among them pauses `items` as any other does).
struct Inner {
    data: Vec<u8>,
    off: usize,
    start: u64,
    next: u64,
}

pub struct Parser {
    buf: Vec<u8>,
    off: usize,
    pub checksum: bool,
    pub tables: HashMap<u64, Table>,
    waiting_for: Option<u64>,
    inner: Option<Inner>,
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64)
}

fn lenenc(b: &[u8], pos: usize) -> Result<(u64, usize), String> {
    let first = *b.get(pos).ok_or("truncated length")?;
    let (n, w) = match first {
        0..=250 => return Ok((first as u64, pos + 1)),
        252 => (2, 1),
        253 => (3, 1),
        254 => (8, 1),
        _ => return Err("bad length-encoded integer".into()),
    };
    let raw = b.get(pos + w..pos + w + n).ok_or("truncated length")?;
    Ok((le(raw), pos + w + n))
}

impl Parser {
    pub fn new(checksum: bool) -> Self {
        Parser { buf: Vec::new(), off: 0, checksum, tables: HashMap::new(), waiting_for: None, inner: None }
    }

    pub fn feed(&mut self, data: &[u8]) {
        if self.off > 0 && self.off * 2 >= self.buf.len() {
            self.buf.drain(..self.off);
            self.off = 0;
        }
        self.buf.extend_from_slice(data);
    }

    pub fn buffered(&self) -> usize {
        self.buf.len() - self.off
    }

    pub fn waiting_for(&self) -> Option<u64> {
        self.waiting_for
    }

    pub fn set_table(&mut self, table_id: u64, state: TableState) {
        if let Some(t) = self.tables.get_mut(&table_id) {
            t.state = state;
        }
        if self.waiting_for == Some(table_id) {
            self.waiting_for = None;
        }
    }

    /// The next whole packet's payload (continuation packets joined), or None if incomplete.
    fn next_packet(&mut self) -> Option<Vec<u8>> {
        let mut at = self.off;
        let mut parts: Vec<(usize, usize)> = Vec::new();
        loop {
            if self.buf.len() < at + 4 {
                return None;
            }
            let n = le(&self.buf[at..at + 3]) as usize;
            if self.buf.len() < at + 4 + n {
                return None;
            }
            parts.push((at + 4, at + 4 + n));
            at += 4 + n;
            if n < 0xFF_FFFF {
                break;
            }
        }
        self.off = at;
        let mut out = Vec::with_capacity(parts.iter().map(|(a, b)| b - a).sum());
        for (a, b) in parts {
            out.extend_from_slice(&self.buf[a..b]);
        }
        Some(out)
    }

    /// Parse up to `limit` items; stops early at a table map Python must decide on.
    pub fn items(&mut self, limit: usize, out: &mut Vec<Item>) -> Result<(), String> {
        while out.len() < limit && self.waiting_for.is_none() {
            if self.inner.is_some() {
                self.inner_event(out)?;
                continue;
            }
            let Some(pkt) = self.next_packet() else { break };
            match pkt.first() {
                Some(0x00) => {}
                Some(0xFE) if pkt.len() < 9 => {
                    out.push(Item::Eof);
                    break;
                }
                Some(0xFF) => {
                    let code = if pkt.len() >= 3 { le(&pkt[1..3]) as u16 } else { 0 };
                    let mut msg = pkt.get(3..).unwrap_or(&[]);
                    if msg.first() == Some(&b'#') && msg.len() >= 6 {
                        msg = &msg[6..];
                    }
                    out.push(Item::Err { code, msg: String::from_utf8_lossy(msg).into_owned() });
                    break;
                }
                _ => return Err("unexpected packet in the binlog stream".into()),
            }
            self.event(pkt, out)?;
        }
        Ok(())
    }

    fn event(&mut self, pkt: Vec<u8>, out: &mut Vec<Item>) -> Result<(), String> {
        let ev = &pkt[1..];
        if ev.len() < 19 {
            return Err("binlog event shorter than its header".into());
        }
        let etype = ev[4];
        let size = le(&ev[9..13]);
        let next = le(&ev[13..17]);
        let start = next.saturating_sub(size);
        let end = if self.checksum && etype != 15 && ev.len() >= 23 { ev.len() - 4 } else { ev.len() };
        self.dispatch(ev, &ev[19..end], start, next, true, out)
    }

    /// The next event of a transaction payload being unpacked (its own header, no checksum).
    fn inner_event(&mut self, out: &mut Vec<Item>) -> Result<(), String> {
        let Some(inner) = self.inner.as_mut() else { return Ok(()) };
        let (off, len) = (inner.off, inner.data.len());
        if off >= len {
            self.inner = None;
            return Ok(());
        }
        if off + 19 > len {
            return Err("transaction payload ends inside an event header".into());
        }
        let size = le(&inner.data[off + 9..off + 13]) as usize;
        if size < 19 || off + size > len {
            return Err("transaction payload holds an event that overruns it".into());
        }
        let ev = inner.data[off..off + size].to_vec();
        let (start, next) = (inner.start, inner.next);
        inner.off += size;
        if inner.off >= len {
            self.inner = None;
        }
        self.dispatch(&ev, &ev[19..], start, next, false, out)
    }

    /// One event: `ev` is the whole event (header .. checksum), `body` the part after the header
    /// without the checksum; `outer`: read from the stream (not unpacked from a payload).
    fn dispatch(&mut self, ev: &[u8], body: &[u8], start: u64, next: u64, outer: bool, out: &mut Vec<Item>)
                -> Result<(), String> {
        let ts = le(&ev[0..4]) as u32;
        let etype = ev[4];
        let server_id = le(&ev[5..9]);
        match etype {
            19 => {
                let table_id = le(&body[0..6.min(body.len())]);
                let known = self.tables.get(&table_id).map(|t| t.body.as_slice() == body).unwrap_or(false);
                if !known {
                    let packet = self.table_packet(ev, outer);
                    self.tables.insert(table_id, Table { body: body.to_vec(), state: TableState::Pending });
                    self.waiting_for = Some(table_id);
                    out.push(Item::TableMap { table_id, packet, ts, start, next });
                }
            }
            23..=25 | 30..=32 | 39 | 166..=171 => self.rows(etype, body, ts, start, next, out)?,
            16 => out.push(Item::Xid { ts, start, next }),
            2 | 18 | 165 => {
                // 18: EXECUTE_LOAD_QUERY (LOAD DATA in statement format): a query event whose
                // post-header has 13 more bytes (file id, start and end of the file name, dup handling)
                let post = if etype == 18 { 26 } else { 13 };
                if body.len() < post {
                    return Err("short query event".into());
                }
                let schema_len = body[8] as usize;
                let vars_len = le(&body[11..13]) as usize;
                let s = post + vars_len;
                let schema = body.get(s..s + schema_len).ok_or("short query event")?.to_vec();
                let text = body.get(s + schema_len + 1..).unwrap_or(&[]);
                let query = if etype == 165 { mariadb_uncompress(text)? } else { text.to_vec() };
                let status = body[post..s].to_vec(); // status variables: pipeline/capture/statusvars.py
                out.push(Item::Query { ts, start, next, schema, query, status });
            }
            162 => {
                if body.len() < 13 {
                    return Err("short GTID event".into());
                }
                let seq = le(&body[0..8]);
                let domain = le(&body[8..12]);
                let flags = body[12];
                let mut p = 13;
                if flags & 0x02 != 0 {
                    p += 8; // FL_GROUP_COMMIT_ID: the commit id
                }
                let xid = if flags & 0xC0 != 0 {
                    let head = body.get(p..p + 6).ok_or("short XA GTID event")?;
                    let (g, b) = (head[4] as usize, head[5] as usize);
                    let data = body.get(p + 6..p + 6 + g + b).ok_or("short XA GTID event")?;
                    Some(xid_key(&head[0..4], g, b, data))
                } else {
                    None
                };
                out.push(Item::Gtid { ts, start, next, gtid: format!("{}-{}-{}", domain, server_id, seq), flags,
                                      mariadb: true, xid });
            }
            33 => {
                if body.len() < 25 {
                    return Err("short GTID event".into());
                }
                let sid = &body[1..17];
                let gno = le(&body[17..25]);
                let h: String = sid.iter().map(|b| format!("{:02x}", b)).collect();
                let uuid = format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32]);
                out.push(Item::Gtid { ts, start, next, gtid: format!("{}:{}", uuid, gno), flags: 0, mariadb: false,
                                      xid: None });
            }
            38 => {
                let head = body.get(0..13).ok_or("short XA PREPARE event")?;
                let (g, b) = (le(&head[5..9]) as usize, le(&head[9..13]) as usize);
                if g > 64 || b > 64 {
                    return Err("XA PREPARE event with an XID longer than 64 bytes".into());
                }
                let data = body.get(13..13 + g + b).ok_or("short XA PREPARE event")?;
                out.push(Item::XaPrepare { ts, start, next, one_phase: head[0] != 0,
                                           xid: xid_key(&head[1..5], g, b, data) });
            }
            40 if outer => self.inner = Some(Inner { data: unpack_payload(body)?, off: 0, start, next }),
            40 => return Err("a transaction payload inside a transaction payload".into()),
            4 => {
                if body.len() < 8 {
                    return Err("short rotate event".into());
                }
                let pos = le(&body[0..8]);
                let file = String::from_utf8_lossy(&body[8..]).into_owned();
                out.push(Item::Rotate { ts, pos, file });
            }
            160 => out.push(Item::Annotate { ts, sql: body.to_vec() }),
            29 => out.push(Item::Annotate { ts, sql: body.get(1..).unwrap_or(&[]).to_vec() }),
            27 | 41 => out.push(Item::Heartbeat { ts, next }), // 41: MySQL 8.0.26+ heartbeat v2
            15 => {
                let raw = body.get(2..52).unwrap_or(&[]);
                let n = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
                let server_version = String::from_utf8_lossy(&raw[..n]).into_owned();
                out.push(Item::Format { ts, start, next, server_version });
            }
            t => out.push(Item::Other { type_code: t, ts, start, next }),
        }
        Ok(())
    }

    /// What Python parses a table map from: the OK byte and the event as the stream has it (an
    /// event from a payload gets the checksum slot the stream's events have, zeroed: unchecked).
    fn table_packet(&self, ev: &[u8], outer: bool) -> Vec<u8> {
        let mut packet = Vec::with_capacity(ev.len() + 5);
        packet.push(0);
        packet.extend_from_slice(ev);
        if !outer && self.checksum {
            let size = (ev.len() + 4) as u32;
            packet[10..14].copy_from_slice(&size.to_le_bytes());
            packet.extend_from_slice(&[0, 0, 0, 0]);
        }
        packet
    }

    fn rows(&mut self, etype: u8, body: &[u8], ts: u32, start: u64, next: u64, out: &mut Vec<Item>)
            -> Result<(), String> {
        let kind = match etype {
            23 | 30 | 166 | 169 => ROWS_INSERT,
            24 | 31 | 39 | 167 | 170 => ROWS_UPDATE,
            _ => ROWS_DELETE,
        };
        if body.len() < 8 {
            return Err("short rows event".into());
        }
        let table_id = le(&body[0..6]);
        let flags = le(&body[6..8]) as u16;
        let mut pos = 8;
        if matches!(etype, 30..=32 | 39 | 169..=171) {
            let extra = le(body.get(8..10).ok_or("short rows event")?) as usize;
            pos = 8 + extra.max(2);
        }
        let (ncols, p) = lenenc(body, pos)?;
        let nb = (ncols as usize).div_ceil(8);
        let present = body.get(p..p + nb).ok_or("short rows event")?;
        let mut p = p + nb;
        let present2 = if kind == ROWS_UPDATE {
            let b = body.get(p..p + nb).ok_or("short rows event")?;
            p += nb;
            Some(b)
        } else {
            None
        };
        let Some(table) = self.tables.get(&table_id) else {
            out.push(Item::RowsSkip { ts, start, next });
            return Ok(());
        };
        if matches!(table.state, TableState::Skip) {
            out.push(Item::RowsSkip { ts, start, next });
            return Ok(());
        }
        let tail = &body[p.min(body.len())..];
        let unpacked;
        let rows = if etype >= 166 {
            unpacked = mariadb_uncompress(tail)?;
            unpacked.as_slice()
        } else {
            tail
        };
        let partial_json = etype == 39;
        // an image without every column (a session's binlog_row_image MINIMAL/NOBLOB) goes to Python,
        // which keeps the before and after images apart (pipeline/capture/reader.py)
        let whole = |b: &[u8]| (0..ncols as usize).all(|i| b[i / 8] >> (i % 8) & 1 == 1);
        let partial_image = !whole(present) || present2.is_some_and(|b| !whole(b));
        match &table.state {
            TableState::Skip => {}
            TableState::Pending => return Err(format!("rows event for table id {} before its plan", table_id)),
            TableState::Native(plan) if !partial_json && !partial_image => {
                let (nrows, data, old) = decode_rows(plan, rows, present, present2)
                    .map_err(|e| format!("table id {} ({}): {}", table_id, plan.name, e))?;
                out.push(Item::Rows { kind, table_id, ts, start, next, nrows, data, old, size: rows.len(), flags,
                                      present: present.to_vec(), present2: present2.map(|b| b.to_vec()) });
            }
            TableState::Native(_) | TableState::Raw => out.push(Item::RowsRaw {
                kind, table_id, ts, start, next, rows: rows.to_vec(), present: present.to_vec(),
                present2: present2.map(|b| b.to_vec()), flags, partial_json }),
        }
        Ok(())
    }
}

/// An XID as `pipeline.capture.events.xid_key` builds it: formatID (4 bytes, little-endian),
/// the gtrid's and bqual's lengths (a byte each), then both.
fn xid_key(format_id: &[u8], gtrid_len: usize, bqual_len: usize, data: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(6 + data.len());
    key.extend_from_slice(format_id);
    key.push(gtrid_len as u8);
    key.push(bqual_len as u8);
    key.extend_from_slice(data);
    key
}

/// A MariaDB compressed record (`log_bin_compress`): a header byte (0x80, the algorithm in bits
/// 4-6, 0 = zlib, the length's byte count in bits 0-2), the original length (big-endian), zlib data.
fn mariadb_uncompress(b: &[u8]) -> Result<Vec<u8>, String> {
    let head = *b.first().ok_or("empty compressed event")?;
    if head & 0x80 == 0 {
        return Err("a compressed event without its compression header".into());
    }
    if (head & 0x70) >> 4 != 0 {
        return Err(format!("compressed event with unknown algorithm {}", (head & 0x70) >> 4));
    }
    let lenlen = (head & 0x07) as usize;
    let raw = b.get(1..1 + lenlen).filter(|_| (1..=4).contains(&lenlen)).ok_or("bad compressed event header")?;
    let len = raw.iter().fold(0usize, |acc, &x| (acc << 8) | x as usize);
    let mut out = Vec::with_capacity(len);
    flate2::read::ZlibDecoder::new(&b[1 + lenlen..]).read_to_end(&mut out)
        .map_err(|e| format!("compressed event does not inflate: {}", e))?;
    if out.len() != len {
        return Err(format!("compressed event inflates to {} bytes, its header says {}", out.len(), len));
    }
    Ok(out)
}

/// The events of a MySQL transaction payload (`binlog_transaction_compression`): header fields
/// (type, length, value as packed integers; 1 payload size, 2 compression type, 3 uncompressed
/// size; 0 ends them), then the payload, zstd-compressed (type 0) or plain (type 255).
fn unpack_payload(body: &[u8]) -> Result<Vec<u8>, String> {
    let (mut pos, mut size, mut ctype, mut usize_) = (0usize, None, None, None);
    loop {
        let (field, p) = lenenc(body, pos)?;
        pos = p;
        if field == 0 {
            break;
        }
        let (len, p) = lenenc(body, pos)?;
        pos = p;
        match field {
            1 | 2 | 3 => {
                let (v, p) = lenenc(body, pos)?;
                pos = p;
                match field {
                    1 => size = Some(v as usize),
                    2 => ctype = Some(v),
                    _ => usize_ = Some(v as usize),
                }
            }
            _ => pos += len as usize,
        }
    }
    let size = size.ok_or("transaction payload without its size")?;
    let payload = body.get(pos..pos + size).ok_or("transaction payload shorter than its size")?;
    let data = match ctype.ok_or("transaction payload without its compression type")? {
        0 => zstd::stream::decode_all(payload).map_err(|e| format!("transaction payload does not decompress: {}", e))?,
        255 => payload.to_vec(),
        t => return Err(format!("transaction payload compressed with unknown type {}", t)),
    };
    if let Some(n) = usize_ {
        if n != data.len() {
            return Err(format!("transaction payload decompresses to {} bytes, its header says {}", data.len(), n));
        }
    }
    Ok(data)
}
