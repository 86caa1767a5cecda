//! JSON string output: escaping as Python's `json.dumps(..., ensure_ascii=False)` does, from
//! UTF-8 text (invalid bytes kept as `\xNN` text, like Python's "backslashreplace"), from
//! ISO-8859-1 bytes (one code point per byte: binary columns), and from Rust strings.

const HEX: &[u8; 16] = b"0123456789abcdef";

#[inline]
fn push_escaped_char_bytes(out: &mut Vec<u8>, s: &[u8]) {
    // `s` is valid UTF-8; only ASCII needs escaping, multi-byte sequences are copied.
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&s[start..i]);
        if esc.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 15) as usize]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&s[start..]);
}

/// A Rust string as a JSON string.
pub fn push_json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    push_escaped_char_bytes(out, s.as_bytes());
    out.push(b'"');
}

/// UTF-8 bytes as a JSON string; each byte of an invalid sequence becomes the text `\xNN`
/// (Python: `raw.decode("utf-8", "backslashreplace")`).
pub fn push_json_utf8_lossless(out: &mut Vec<u8>, raw: &[u8]) {
    out.push(b'"');
    let mut rest = raw;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                push_escaped_char_bytes(out, s.as_bytes());
                break;
            }
            Err(e) => {
                let good = e.valid_up_to();
                push_escaped_char_bytes(out, &rest[..good]);
                let bad = e.error_len().unwrap_or(rest.len() - good);
                for &b in &rest[good..good + bad] {
                    // the text "\xNN" inside a JSON string: the backslash itself is escaped
                    out.extend_from_slice(b"\\\\x");
                    out.push(HEX[(b >> 4) as usize]);
                    out.push(HEX[(b & 15) as usize]);
                }
                rest = &rest[good + bad..];
            }
        }
    }
    out.push(b'"');
}

/// ISO-8859-1 bytes (one code point per byte) as a JSON string.
pub fn push_json_latin1(out: &mut Vec<u8>, raw: &[u8]) {
    out.push(b'"');
    for &b in raw {
        if b < 0x80 {
            push_escaped_char_bytes(out, &[b]);
        } else {
            out.push(0xC0 | (b >> 6));
            out.push(0x80 | (b & 0x3F));
        }
    }
    out.push(b'"');
}

/// Code points of MySQL's `latin1` bytes 0x80..0x9F: Windows-1252's, and the five bytes Windows
/// leaves undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D) as the C1 controls of the same number, as the
/// server converts them (pipeline/capture/charsets.py); every other byte is its own code point.
const CP1252_HIGH: [u16; 32] = [0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F, 0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178];

/// cp1252 bytes (MySQL latin1) as a JSON string.
pub fn push_json_cp1252(out: &mut Vec<u8>, raw: &[u8]) {
    out.push(b'"');
    let mut tmp = [0u8; 4];
    for &b in raw {
        if b < 0x80 {
            push_escaped_char_bytes(out, &[b]);
            continue;
        }
        let cp = if (0x80..0xA0).contains(&b) { CP1252_HIGH[(b - 0x80) as usize] as u32 } else { b as u32 };
        if cp == 0 {
            out.extend_from_slice(b"\\\\x");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 15) as usize]);
        } else {
            let c = char::from_u32(cp).expect("cp1252 code point");
            out.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
        }
    }
    out.push(b'"');
}
