//! Value rules: one lossless text encoding per MySQL column type, read from row-image bytes
//! and written as a JSON string into the output buffer.
//!
//! These mirror `pipeline/capture/values.py` rule for rule: the rules (which text each type gets)
//! are written once in Python in `sluice_common/dmlvalues.py`, and `values.py` reads the same
//! row-image layouts as here and stays the reference; `tests/unit/test_capture_native.py` checks
//! both give the same text for every type, on random bytes.

use crate::floats::{float32_text, py_repr};
use crate::json::{push_json_cp1252, push_json_latin1, push_json_str, push_json_utf8_lossless};

/// A column's decoding rule, compiled by Python from the table map (`pipeline/capture/native.py`).
#[derive(Clone, Debug)]
pub enum Op {
    Int { size: usize, unsigned: bool },
    Float,
    Double,
    Decimal { precision: usize, scale: usize },
    Date,
    Datetime2 { fsp: usize },
    Timestamp2 { fsp: usize },
    Time2 { fsp: usize },
    OldTime,
    OldDatetime,
    OldTimestamp,
    Year,
    Utf8 { len_size: usize },
    Latin1 { len_size: usize, pad_to: usize },
    Cp1252 { len_size: usize },
    Enum { size: usize, members: Vec<String> },
    Set { size: usize, members: Vec<String> },
    Bit { nbytes: usize },
    Geometry { len_size: usize },
}

pub type DResult = Result<usize, String>;

const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];

fn take(buf: &[u8], pos: usize, n: usize) -> Result<&[u8], String> {
    buf.get(pos..pos + n).ok_or_else(|| "row image ends inside a value (truncated rows event)".to_string())
}

fn le_uint(b: &[u8]) -> u64 {
    b.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64)
}

fn be_uint(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |acc, &x| (acc << 8) | x as u64)
}

/// Decimal digits of `v`, at least `width` of them (zero-padded), as Rust's `{:0w$}` and
/// Python's `%0*d` print a non-negative number; no allocation.
#[inline]
fn push_uint(out: &mut Vec<u8>, mut v: u64, width: usize) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for _ in (buf.len() - i)..width {
        out.push(b'0');
    }
    out.extend_from_slice(&buf[i..]);
}

#[inline]
fn push_int(out: &mut Vec<u8>, v: i64, width: usize) {
    if v < 0 {
        out.extend_from_slice(format!("{:0w$}", v, w = width).as_bytes());
    } else {
        push_uint(out, v as u64, width);
    }
}

fn quoted(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

/// Decode the value at `pos` with `op`, append it (JSON string) to `out`; return the next position.
pub fn decode(op: &Op, buf: &[u8], pos: usize, out: &mut Vec<u8>) -> DResult {
    match op {
        Op::Int { size, unsigned } => {
            let b = take(buf, pos, *size)?;
            let u = le_uint(b);
            out.push(b'"');
            if *unsigned {
                push_uint(out, u, 0);
            } else {
                let shift = 64 - 8 * *size as u32;
                let v = ((u << shift) as i64) >> shift;
                push_int(out, v, 0);
            }
            out.push(b'"');
            Ok(pos + size)
        }
        Op::Float => {
            let b = take(buf, pos, 4)?;
            let x = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            quoted(out, &float32_text(x));
            Ok(pos + 4)
        }
        Op::Double => {
            let b = take(buf, pos, 8)?;
            let x = f64::from_le_bytes(b.try_into().unwrap());
            quoted(out, &py_repr(x));
            Ok(pos + 8)
        }
        Op::Decimal { precision, scale } => decimal(buf, pos, *precision, *scale, out),
        Op::Date => {
            let v = le_uint(take(buf, pos, 3)?);
            out.push(b'"');
            push_uint(out, v >> 9, 4);
            out.push(b'-');
            push_uint(out, (v >> 5) & 15, 2);
            out.push(b'-');
            push_uint(out, v & 31, 2);
            out.push(b'"');
            Ok(pos + 3)
        }
        Op::Datetime2 { fsp } => {
            let v = be_uint(take(buf, pos, 5)?) as i64 - 0x80_0000_0000;
            let (ymd, hms) = (v >> 17, v & 0x1FFFF);
            let ym = ymd >> 5;
            out.push(b'"');
            push_int(out, ym.div_euclid(13), 4);
            out.push(b'-');
            push_int(out, ym.rem_euclid(13), 2);
            out.push(b'-');
            push_int(out, ymd & 31, 2);
            out.push(b' ');
            push_int(out, hms >> 12, 2);
            out.push(b':');
            push_int(out, (hms >> 6) & 63, 2);
            out.push(b':');
            push_int(out, hms & 63, 2);
            let n = frac_into(buf, pos + 5, *fsp, out)?;
            out.push(b'"');
            Ok(pos + 5 + n)
        }
        Op::Timestamp2 { fsp } => {
            let secs = be_uint(take(buf, pos, 4)?);
            // the zero TIMESTAMP is 0 seconds without a fraction; 0 seconds with one (MariaDB stores an
            // out-of-range value so under a relaxed sql_mode) is 1970-01-01 00:00:00.f UTC, as it prints it
            let fraction = take(buf, pos + 4, (*fsp + 1) / 2)?.iter().any(|&b| b != 0);
            let mut s = if secs == 0 && fraction { "1970-01-01 00:00:00".to_string() } else { utc_text(secs) };
            let n = frac(buf, pos + 4, *fsp, &mut s)?;
            quoted(out, &s);
            Ok(pos + 4 + n)
        }
        Op::Time2 { fsp } => time2(buf, pos, *fsp, out),
        Op::OldTime => {
            let u = le_uint(take(buf, pos, 3)?);
            let mut v = ((u << 40) as i64) >> 40;
            let sign = if v < 0 { v = -v; "-" } else { "" };
            quoted(out, &format!("{}{:02}:{:02}:{:02}", sign, v / 10000, v / 100 % 100, v % 100));
            Ok(pos + 3)
        }
        Op::OldDatetime => {
            let v = le_uint(take(buf, pos, 8)?);
            let (d, t) = (v / 1_000_000, v % 1_000_000);
            quoted(out, &format!("{:04}-{:02}-{:02} {:02}:{:02}:{:02}", d / 10000, d / 100 % 100, d % 100,
                                 t / 10000, t / 100 % 100, t % 100));
            Ok(pos + 8)
        }
        Op::OldTimestamp => {
            let secs = le_uint(take(buf, pos, 4)?);
            quoted(out, &utc_text(secs));
            Ok(pos + 4)
        }
        Op::Year => {
            let v = take(buf, pos, 1)?[0] as u32;
            if v == 0 { quoted(out, "0000") } else { quoted(out, &format!("{:04}", 1900 + v)) }
            Ok(pos + 1)
        }
        Op::Utf8 { len_size } => {
            let n = le_uint(take(buf, pos, *len_size)?) as usize;
            let start = pos + len_size;
            push_json_utf8_lossless(out, take(buf, start, n)?);
            Ok(start + n)
        }
        Op::Latin1 { len_size, pad_to } => {
            let n = le_uint(take(buf, pos, *len_size)?) as usize;
            let start = pos + len_size;
            let raw = take(buf, start, n)?;
            if *pad_to > n {
                let mut padded = raw.to_vec();
                padded.resize(*pad_to, 0);
                push_json_latin1(out, &padded);
            } else {
                push_json_latin1(out, raw);
            }
            Ok(start + n)
        }
        Op::Cp1252 { len_size } => {
            let n = le_uint(take(buf, pos, *len_size)?) as usize;
            let start = pos + len_size;
            push_json_cp1252(out, take(buf, start, n)?);
            Ok(start + n)
        }
        Op::Enum { size, members } => {
            let i = le_uint(take(buf, pos, *size)?) as usize;
            if i == 0 {
                out.extend_from_slice(b"\"\"");
            } else if i <= members.len() {
                push_json_str(out, &members[i - 1]);
            } else {
                quoted(out, &i.to_string());
            }
            Ok(pos + size)
        }
        Op::Set { size, members } => {
            let mask = le_uint(take(buf, pos, *size)?);
            let chosen: Vec<&str> = members.iter().enumerate()
                .filter(|(i, _)| *i < 64 && mask >> i & 1 == 1).map(|(_, m)| m.as_str()).collect();
            let s = chosen.join(",");
            push_json_str(out, &s);
            Ok(pos + size)
        }
        Op::Bit { nbytes } => {
            let v = be_uint(take(buf, pos, *nbytes)?);
            quoted(out, &v.to_string());
            Ok(pos + nbytes)
        }
        Op::Geometry { len_size } => {
            let n = le_uint(take(buf, pos, *len_size)?) as usize;
            let start = pos + len_size;
            let raw = take(buf, start, n)?;
            out.push(b'"');
            for b in raw {
                out.extend_from_slice(format!("{:02X}", b).as_bytes());
            }
            out.push(b'"');
            Ok(start + n)
        }
    }
}

fn frac_into(buf: &[u8], pos: usize, fsp: usize, out: &mut Vec<u8>) -> DResult {
    if fsp == 0 {
        return Ok(0);
    }
    let nbytes = (fsp + 1) / 2;
    let v = be_uint(take(buf, pos, nbytes)?);
    let mut digits = Vec::with_capacity(8);
    push_uint(&mut digits, v, 2 * nbytes);
    out.push(b'.');
    out.extend_from_slice(&digits[..fsp.min(digits.len())]);
    Ok(nbytes)
}

fn frac(buf: &[u8], pos: usize, fsp: usize, s: &mut String) -> DResult {
    if fsp == 0 {
        return Ok(0);
    }
    let nbytes = (fsp + 1) / 2;
    let v = be_uint(take(buf, pos, nbytes)?);
    let digits = format!("{:0w$}", v, w = 2 * nbytes);
    s.push('.');
    s.push_str(&digits[..fsp.min(digits.len())]);
    Ok(nbytes)
}

/// `YYYY-MM-DD HH:MM:SS` of a Unix time in UTC; 0 is the zero timestamp.
fn utc_text(secs: u64) -> String {
    if secs == 0 {
        return "0000-00-00 00:00:00".to_string();
    }
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // civil-from-days (proleptic Gregorian), days since 1970-01-01
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!("{:04}-{:02}-{:02} {:02}:{:02}:{:02}", y, m, d, rem / 3600, rem / 60 % 60, rem % 60)
}

fn time2(buf: &[u8], pos: usize, fsp: usize, out: &mut Vec<u8>) -> DResult {
    let nfrac = (fsp + 1) / 2;
    let frac_scale: i64 = [0, 10000, 100, 1][nfrac];
    let mut intpart = be_uint(take(buf, pos, 3)?) as i64 - 0x80_0000;
    let mut fv = if nfrac > 0 { be_uint(take(buf, pos + 3, nfrac)?) as i64 } else { 0 };
    if intpart < 0 && fv != 0 {
        intpart += 1;
        fv -= 1i64 << (8 * nfrac);
    }
    let packed = (intpart << 24) + fv * frac_scale;
    let sign = if packed < 0 { "-" } else { "" };
    let packed = packed.abs();
    let (hms, micros) = (packed >> 24, packed & 0xFF_FFFF);
    let mut s = format!("{}{:02}:{:02}:{:02}", sign, (hms >> 12) & 0x3FF, (hms >> 6) & 63, hms & 63);
    if fsp > 0 {
        let m = format!("{:06}", micros);
        s.push('.');
        s.push_str(&m[..fsp.min(m.len())]);
    }
    quoted(out, &s);
    Ok(pos + 3 + nfrac)
}

fn decimal(buf: &[u8], pos: usize, precision: usize, scale: usize, out: &mut Vec<u8>) -> DResult {
    let intg = precision.saturating_sub(scale);
    let (intg0, intg0x) = (intg / 9, intg % 9);
    let (frac0, frac0x) = (scale / 9, scale % 9);
    let lead = DIG2BYTES[intg0x];
    let tail = DIG2BYTES[frac0x];
    let size = intg0 * 4 + lead + frac0 * 4 + tail;
    let mut raw = take(buf, pos, size)?.to_vec();
    if raw.is_empty() {
        quoted(out, "0");
        return Ok(pos);
    }
    let negative = raw[0] & 0x80 == 0;
    raw[0] ^= 0x80;
    if negative {
        for b in raw.iter_mut() {
            *b ^= 0xFF;
        }
    }
    // the integer part as Python computes it (ival * 10**9 + group), in base-10**9 limbs, so that
    // even groups above 999999999 (never written by MySQL) give the reference's text
    let mut limbs: Vec<u64> = vec![if lead > 0 { be_uint(&raw[..lead]) } else { 0 }];
    let mut p = lead;
    for _ in 0..intg0 {
        let mut carry = be_uint(&raw[p..p + 4]);
        for limb in limbs.iter_mut() {
            let v = *limb * 1_000_000_000 + carry;
            *limb = v % 1_000_000_000;
            carry = v / 1_000_000_000;
        }
        while carry > 0 {
            limbs.push(carry % 1_000_000_000);
            carry /= 1_000_000_000;
        }
        p += 4;
    }
    let mut digits = String::with_capacity(precision + 2);
    for (k, limb) in limbs.iter().rev().enumerate() {
        if k == 0 {
            digits.push_str(&limb.to_string());
        } else {
            digits.push_str(&format!("{:09}", limb));
        }
    }
    let int_text = digits.trim_start_matches('0');
    let int_zero = int_text.is_empty();
    let mut text = String::with_capacity(precision + 3);
    text.push_str(if int_zero { "0" } else { int_text });
    if scale > 0 {
        let mut fracs = String::with_capacity(scale);
        for _ in 0..frac0 {
            fracs.push_str(&format!("{:09}", be_uint(&raw[p..p + 4])));
            p += 4;
        }
        if tail > 0 {
            fracs.push_str(&format!("{:0w$}", be_uint(&raw[p..p + tail]), w = frac0x));
        }
        let frac_zero = fracs.bytes().all(|c| c == b'0');
        text.push('.');
        text.push_str(&fracs);
        if negative && (!int_zero || !frac_zero) {
            text.insert(0, '-');
        }
    } else if negative && !int_zero {
        text.insert(0, '-');
    }
    quoted(out, &text);
    Ok(pos + size)
}
