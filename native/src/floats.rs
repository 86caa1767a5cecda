//! Float text exactly as Python prints it: `repr(float)` for DOUBLE, and for FLOAT the shortest
//! decimal that reads back as the same float32 (`pipeline/capture/values.py::float32_text`).

/// Python's `repr(x)` of a double: shortest round-trip digits, fixed notation for decimal
/// exponents in (-4, 16], else `d.ddde+XX`.
pub fn py_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let sci = format!("{:e}", x); // shortest round-trip digits, e.g. "-2.5e-300", "1e16"
    let (mant, exp) = sci.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("exponent");
    let (neg, mant) = match mant.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mant),
    };
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let decpt = exp + 1;
    let mut s = String::with_capacity(digits.len() + 8);
    if neg {
        s.push('-');
    }
    if decpt <= -4 || decpt > 16 {
        s.push_str(&digits[..1]);
        if digits.len() > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        s.push_str(&format!("e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs()));
    } else if decpt <= 0 {
        s.push_str("0.");
        for _ in 0..(-decpt) {
            s.push('0');
        }
        s.push_str(&digits);
    } else {
        let d = decpt as usize;
        if d >= digits.len() {
            s.push_str(&digits);
            for _ in digits.len()..d {
                s.push('0');
            }
            s.push_str(".0");
        } else {
            s.push_str(&digits[..d]);
            s.push('.');
            s.push_str(&digits[d..]);
        }
    }
    s
}

/// The shortest `%.Ng` text (N = 1..9) of a float32 that reads back as the same float32,
/// printed as Python's repr of the double it denotes.
pub fn float32_text(x: f32) -> String {
    let xd = x as f64;
    for digits in 1..10usize {
        let s = format!("{:.*e}", digits - 1, xd);
        let v: f64 = match s.parse() {
            Ok(v) => v,
            Err(_) => continue,
        };
        let f = v as f32;
        if f.is_finite() != v.is_finite() {
            continue; // Python's struct.pack('f') refuses values that overflow float32
        }
        if f as f64 == xd {
            return py_repr(v);
        }
    }
    py_repr(xd)
}
