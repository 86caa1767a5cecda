//! Row images of one rows event to canal's `data` and `old` JSON arrays.
//!
//! `data` holds one object per row (the after-image for UPDATE, the before-image for DELETE),
//! keys in column order; `old` (UPDATE only) holds per row the before-values of the columns whose
//! value changed, in the before-image's column order (`pipeline/capture/dml.py::rows_records`).

use crate::values::{decode, Op};

/// One table layout's decoding plan: per column, the value rule and its JSON key (`"name":`).
pub struct Plan {
    pub name: String,
    pub ops: Vec<Op>,
    pub keys: Vec<Vec<u8>>,
}

fn present_columns(bitmap: &[u8], ncols: usize) -> Vec<usize> {
    (0..ncols).filter(|i| bitmap.get(i / 8).is_some_and(|b| b >> (i % 8) & 1 == 1)).collect()
}

/// Decode one row image at `pos` into `out` as a JSON object; `spans` receives, per present
/// column, (column index, value start, value end) in `out`. Returns the next position.
fn decode_row(plan: &Plan, cols: &[usize], buf: &[u8], mut pos: usize, out: &mut Vec<u8>,
              spans: &mut Vec<(usize, usize, usize)>) -> Result<usize, String> {
    let nb = cols.len().div_ceil(8);
    let nulls = buf.get(pos..pos + nb).ok_or("row image ends inside its null bitmap")?;
    pos += nb;
    spans.clear();
    out.push(b'{');
    for (j, &c) in cols.iter().enumerate() {
        if j > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&plan.keys[c]);
        let s = out.len();
        if nulls[j / 8] >> (j % 8) & 1 == 1 {
            out.extend_from_slice(b"null");
        } else {
            pos = decode(&plan.ops[c], buf, pos, out)?;
        }
        spans.push((c, s, out.len()));
    }
    out.push(b'}');
    Ok(pos)
}

/// (rows, data JSON, old JSON for UPDATE) of a rows event's row images `buf`.
pub fn decode_rows(plan: &Plan, buf: &[u8], present: &[u8], present2: Option<&[u8]>)
                   -> Result<(usize, Vec<u8>, Option<Vec<u8>>), String> {
    let ncols = plan.ops.len();
    let cols = present_columns(present, ncols);
    let mut data = Vec::with_capacity(buf.len() * 2 + 16);
    let mut spans = Vec::with_capacity(cols.len());
    let mut n = 0;
    let mut pos = 0;
    data.push(b'[');
    let Some(present2) = present2 else {
        while pos < buf.len() {
            if n > 0 {
                data.push(b',');
            }
            pos = decode_row(plan, &cols, buf, pos, &mut data, &mut spans)?;
            n += 1;
        }
        data.push(b']');
        return Ok((n, data, None));
    };
    let cols2 = present_columns(present2, ncols);
    let mut old = Vec::with_capacity(64);
    let mut before = Vec::with_capacity(buf.len());
    let mut before_spans = Vec::with_capacity(cols.len());
    let mut after_at = vec![usize::MAX; ncols];
    old.push(b'[');
    while pos < buf.len() {
        if n > 0 {
            data.push(b',');
            old.push(b',');
        }
        before.clear();
        pos = decode_row(plan, &cols, buf, pos, &mut before, &mut before_spans)?;
        pos = decode_row(plan, &cols2, buf, pos, &mut data, &mut spans)?;
        for (k, &(c, _, _)) in spans.iter().enumerate() {
            after_at[c] = k;
        }
        old.push(b'{');
        let mut first = true;
        for &(c, s, e) in &before_spans {
            let changed = match after_at[c] {
                usize::MAX => true,
                k => {
                    let (_, s2, e2) = spans[k];
                    data[s2..e2] != before[s..e]
                }
            };
            if changed {
                if !first {
                    old.push(b',');
                }
                first = false;
                old.extend_from_slice(&plan.keys[c]);
                old.extend_from_slice(&before[s..e]);
            }
        }
        old.push(b'}');
        for &(c, _, _) in &spans {
            after_at[c] = usize::MAX;
        }
        n += 1;
    }
    data.push(b']');
    old.push(b']');
    Ok((n, data, Some(old)))
}
