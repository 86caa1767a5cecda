//! Kafka partitions of encoded Dml records, as canal's `partitionHash` computes them.
//!
//! `head` and `row_hashes` read, from each record (JSON without its closing `}`), the top-level
//! `database`, `table`, `pkNames` and the key values of every row in `data`, and hashes them like
//! Java's `String.hashCode` (UTF-16 code units, XOR of the key columns, the database's hash mixed
//! in): the same numbers as `pipeline/store/kafka/routing.py`, which stays the reference and the
//! fallback. A record this scanner cannot place with certainty (rows on several partitions,
//! malformed JSON, a non-string key value) is left to Python (`place.rs`).

use std::borrow::Cow;

/// Java's `String.hashCode` over the UTF-16 code units of `s`.
pub fn java_hash(s: &str) -> i32 {
    let mut h: i32 = 0;
    let mut buf = [0u16; 2];
    for c in s.chars() {
        for u in c.encode_utf16(&mut buf) {
            h = h.wrapping_mul(31).wrapping_add(*u as i32);
        }
    }
    h
}

/// `abs(abs(h) % n)` as Python computes it on the signed 32-bit hash.
pub fn bucket(h: i32, n: i64) -> i64 {
    ((h as i64).abs() % n).abs()
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        if self.peek()? == c {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let s = std::str::from_utf8(self.b.get(self.i..self.i + 4)?).ok()?;
        self.i += 4;
        u32::from_str_radix(s, 16).ok()
    }

    /// A JSON string, decoded (the scanner stands on its opening quote); borrowed from the line
    /// when it has no escapes (keys and most values), so nothing is allocated for it.
    fn text(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let from = self.i;
        let end = memchr::memchr2(b'"', b'\\', &self.b[from..])? + from;
        if self.b[end] == b'"' {
            self.i = end + 1;
            return std::str::from_utf8(&self.b[from..end]).ok().map(Cow::Borrowed);
        }
        self.i = from - 1;
        self.string().map(Cow::Owned)
    }

    /// A JSON string, decoded (the scanner stands on its opening quote).
    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let mut out: Vec<u8> = Vec::new();
        let mut start = self.i;
        loop {
            let c = *self.b.get(self.i)?;
            match c {
                b'"' => {
                    out.extend_from_slice(&self.b[start..self.i]);
                    self.i += 1;
                    return String::from_utf8(out).ok();
                }
                b'\\' => {
                    out.extend_from_slice(&self.b[start..self.i]);
                    let e = *self.b.get(self.i + 1)?;
                    self.i += 2;
                    let simple = match e {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'/' => Some(b'/'),
                        b'b' => Some(8),
                        b'f' => Some(12),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        b'u' => None,
                        _ => return None,
                    };
                    match simple {
                        Some(ch) => out.push(ch),
                        None => {
                            let mut cp = self.hex4()?;
                            if (0xD800..0xDC00).contains(&cp) {
                                // a surrogate pair; a lone surrogate is left to Python
                                if self.b.get(self.i..self.i + 2)? != b"\\u" {
                                    return None;
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return None;
                                }
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                            }
                            let ch = char::from_u32(cp)?;
                            let mut tmp = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                        }
                    }
                    start = self.i;
                }
                _ => self.i += 1,
            }
        }
    }

    fn skip_string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            let at = memchr::memchr2(b'"', b'\\', self.b.get(self.i..)?)? + self.i;
            if self.b[at] == b'"' {
                self.i = at + 1;
                return Some(());
            }
            self.i = at + 2;
        }
    }

    /// Skip any JSON value.
    fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' | b'[' => {
                let mut depth = 0usize;
                while let Some(c) = self.b.get(self.i) {
                    match c {
                        b'"' => {
                            self.skip_string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
                None
            }
            _ => {
                // number, true, false, null
                let s = self.i;
                while self.i < self.b.len() && !matches!(self.b[self.i], b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
                    self.i += 1;
                }
                (self.i > s).then_some(())
            }
        }
    }

    fn is_null(&mut self) -> bool {
        if self.peek() == Some(b'n') && self.b.get(self.i..self.i + 4) == Some(b"null") {
            self.i += 4;
            true
        } else {
            false
        }
    }

    fn opt_string(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.is_null() {
            Some(None)
        } else {
            self.text().map(Some)
        }
    }

    fn strings(&mut self) -> Option<Vec<String>> {
        if self.is_null() {
            return Some(Vec::new());
        }
        self.eat(b'[')?;
        let mut out = Vec::new();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(out);
        }
        loop {
            out.push(self.text()?.into_owned());
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(out);
                }
                _ => return None,
            }
        }
    }
}

/// What routing needs of one record: its table, key names and where its rows are.
pub struct Head {
    pub database: String,
    pub table: String,
    pub pk_names: Vec<String>,
    data: Option<(usize, usize)>,
}

/// The top-level keys of a record (a JSON object, its closing brace optional).
pub fn head(line: &[u8]) -> Option<Head> {
    let mut s = Scan { b: line, i: 0 };
    s.eat(b'{')?;
    let (mut database, mut table, mut pk_names, mut data) = (None, None, None, None);
    loop {
        match s.peek() {
            None | Some(b'}') => break,
            Some(b',') => {
                s.i += 1;
                continue;
            }
            _ => {}
        }
        let key = s.text()?;
        s.eat(b':')?;
        match key.as_ref() {
            "database" => database = Some(s.opt_string()?.map(Cow::into_owned)),
            "table" => table = Some(s.opt_string()?.map(Cow::into_owned)),
            "pkNames" => pk_names = Some(s.strings()?),
            "data" => {
                s.ws();
                let from = s.i;
                s.skip_value()?;
                data = Some((from, s.i));
            }
            _ => s.skip_value()?,
        }
        if database.is_some() && table.is_some() && pk_names.is_some() && data.is_some() {
            break; // all routing needs (the rest: old, gtid, positions)
        }
    }
    Some(Head { database: database.flatten().unwrap_or_default(), table: table.flatten().unwrap_or_default(),
                pk_names: pk_names.unwrap_or_default(), data })
}

/// The hash of every row's key values (`cols`), `base` mixed in; None: not certain (e.g. a
/// non-string value), leave it to Python. No rows: an empty list.
pub fn row_hashes(line: &[u8], h: &Head, cols: &[String], base: i32) -> Option<Vec<i32>> {
    let Some((from, to)) = h.data else { return Some(Vec::new()) };
    let mut s = Scan { b: &line[..to], i: from };
    if s.is_null() {
        return Some(Vec::new());
    }
    s.eat(b'[')?;
    let mut out = Vec::new();
    let mut values = vec![0i32; cols.len()]; // per key column (a column named twice hashes twice, as in Python)
    loop {
        match s.peek()? {
            b']' => return Some(out),
            b',' => {
                s.i += 1;
                continue;
            }
            _ => {}
        }
        s.eat(b'{')?;
        values.fill(0);
        loop {
            match s.peek()? {
                b'}' => {
                    s.i += 1;
                    break;
                }
                b',' => {
                    s.i += 1;
                    continue;
                }
                _ => {}
            }
            let key = s.text()?;
            s.eat(b':')?;
            if cols.iter().any(|c| c.as_str() == key.as_ref()) {
                // None: a number or other non-string key value
                let v = s.opt_string()?.map(|t| java_hash(&t)).unwrap_or(0);
                for (j, c) in cols.iter().enumerate() {
                    if c.as_str() == key.as_ref() {
                        values[j] = v;
                    }
                }
            } else {
                s.skip_value()?;
            }
        }
        out.push(values.iter().fold(base, |k, v| k ^ v));
    }
}
