//! The replication stream: MySQL packet framing (including 16 MB continuation packets),
//! binlog event headers, and the events capture reads. Rows events of a table whose plan is
//! known are decoded here to JSON (`rows.rs`); table maps are compared by their bytes, and only
//! a table map whose bytes are new for its table id goes back to Python to be parsed.

use std::collections::HashMap;

use crate::rows::{decode_rows, Plan};

pub const ROWS_INSERT: u8 = 0;
pub const ROWS_UPDATE: u8 = 1;
pub const ROWS_DELETE: u8 = 2;

/// One thing found in the stream, in stream order (see `lib.rs` for the Python tuples).
pub enum Item {
    Rows { kind: u8, table_id: u64, ts: u32, start: u64, next: u64, nrows: usize, data: Vec<u8>,
           old: Option<Vec<u8>>, size: usize },
    RowsSkip { ts: u32, start: u64, next: u64 },
    RowsRaw { kind: u8, table_id: u64, ts: u32, start: u64, next: u64, rows: Vec<u8>, present: Vec<u8>,
              present2: Option<Vec<u8>> },
    TableMap { table_id: u64, packet: Vec<u8>, ts: u32, start: u64, next: u64 },
    Gtid { ts: u32, start: u64, next: u64, gtid: String, standalone: bool, mariadb: bool },
    Xid { ts: u32, start: u64, next: u64 },
    Query { ts: u32, start: u64, next: u64, schema: Vec<u8>, query: Vec<u8> },
    Rotate { ts: u32, pos: u64, file: String },
    Annotate { ts: u32, sql: Vec<u8> },
    Heartbeat { ts: u32, next: u64 },
    Refused { type_code: u8, start: u64 },
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

pub struct Parser {
    buf: Vec<u8>,
    off: usize,
    pub checksum: bool,
    pub tables: HashMap<u64, Table>,
    waiting_for: Option<u64>,
}

const REFUSED: &[u8] = &[38, 39, 40, 165, 166, 167, 168, 169, 170, 171];

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
        Parser { buf: Vec::new(), off: 0, checksum, tables: HashMap::new(), waiting_for: None }
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
        let ts = le(&ev[0..4]) as u32;
        let etype = ev[4];
        let server_id = le(&ev[5..9]);
        let size = le(&ev[9..13]) as u64;
        let next = le(&ev[13..17]);
        let start = next.saturating_sub(size);
        let end = if self.checksum && etype != 15 && ev.len() >= 23 { ev.len() - 4 } else { ev.len() };
        let body = &ev[19..end];
        match etype {
            19 => {
                let table_id = le(&body[0..6.min(body.len())]);
                let known = self.tables.get(&table_id).map(|t| t.body.as_slice() == body).unwrap_or(false);
                if !known {
                    self.tables.insert(table_id, Table { body: body.to_vec(), state: TableState::Pending });
                    self.waiting_for = Some(table_id);
                    out.push(Item::TableMap { table_id, packet: pkt.clone(), ts, start, next });
                }
            }
            23..=25 | 30..=32 => self.rows(etype, body, ts, start, next, out)?,
            16 => out.push(Item::Xid { ts, start, next }),
            2 => {
                if body.len() < 13 {
                    return Err("short query event".into());
                }
                let schema_len = body[8] as usize;
                let vars_len = le(&body[11..13]) as usize;
                let s = 13 + vars_len;
                let schema = body.get(s..s + schema_len).ok_or("short query event")?.to_vec();
                let query = body.get(s + schema_len + 1..).unwrap_or(&[]).to_vec();
                out.push(Item::Query { ts, start, next, schema, query });
            }
            162 => {
                if body.len() < 13 {
                    return Err("short GTID event".into());
                }
                let seq = le(&body[0..8]);
                let domain = le(&body[8..12]);
                let flags = body[12];
                out.push(Item::Gtid { ts, start, next, gtid: format!("{}-{}-{}", domain, server_id, seq),
                                      standalone: flags & 1 != 0, mariadb: true });
            }
            33 => {
                if body.len() < 25 {
                    return Err("short GTID event".into());
                }
                let sid = &body[1..17];
                let gno = le(&body[17..25]);
                let h: String = sid.iter().map(|b| format!("{:02x}", b)).collect();
                let uuid = format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32]);
                out.push(Item::Gtid { ts, start, next, gtid: format!("{}:{}", uuid, gno), standalone: false,
                                      mariadb: false });
            }
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
            t if REFUSED.contains(&t) => out.push(Item::Refused { type_code: t, start }),
            _ => {}
        }
        Ok(())
    }

    fn rows(&mut self, etype: u8, body: &[u8], ts: u32, start: u64, next: u64, out: &mut Vec<Item>)
            -> Result<(), String> {
        let kind = match etype {
            23 | 30 => ROWS_INSERT,
            24 | 31 => ROWS_UPDATE,
            _ => ROWS_DELETE,
        };
        if body.len() < 8 {
            return Err("short rows event".into());
        }
        let table_id = le(&body[0..6]);
        let mut pos = 8;
        if etype >= 30 {
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
        let rows = &body[p.min(body.len())..];
        let Some(table) = self.tables.get(&table_id) else {
            out.push(Item::RowsSkip { ts, start, next });
            return Ok(());
        };
        match &table.state {
            TableState::Skip => out.push(Item::RowsSkip { ts, start, next }),
            TableState::Pending => return Err(format!("rows event for table id {} before its plan", table_id)),
            TableState::Raw => out.push(Item::RowsRaw { kind, table_id, ts, start, next, rows: rows.to_vec(),
                                                        present: present.to_vec(),
                                                        present2: present2.map(|b| b.to_vec()) }),
            TableState::Native(plan) => {
                let (nrows, data, old) = decode_rows(plan, rows, present, present2)
                    .map_err(|e| format!("table id {} ({}): {}", table_id, plan.name, e))?;
                out.push(Item::Rows { kind, table_id, ts, start, next, nrows, data, old, size: rows.len() });
            }
        }
        Ok(())
    }
}
