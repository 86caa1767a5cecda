//! `sluice_binlog`: the hot path of Sluice's capture, in Rust.
//!
//! `Stream` takes the raw bytes of a binlog dump connection (`feed`), frames packets, parses
//! events (unpacking MySQL transaction payloads and MariaDB compressed events) and decodes the
//! row images of planned tables to JSON, and hands back one event object per binlog event
//! (`items`). The event classes are the named tuples of `pipeline/capture/events.py`, passed to
//! `Stream(checksum, classes)` in `EVENT_CLASSES` order; each event is built as that class with
//! its fields in the order declared there. Parsing runs with the GIL released.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

mod events;
mod floats;
mod json;
mod kafka;
mod place;
mod producer;
mod rows;
mod values;

use events::{Item, Parser, TableState};
use rows::Plan;
use values::Op;

type OpSpec = (u8, usize, usize, Vec<String>);

fn op_from(spec: &OpSpec) -> PyResult<Op> {
    let (code, a, b, members) = spec;
    let (a, b) = (*a, *b);
    Ok(match code {
        0 if [1, 2, 3, 4, 8].contains(&a) => Op::Int { size: a, unsigned: b != 0 },
        1 => Op::Float,
        2 => Op::Double,
        3 if a <= 65 && b <= 38 && b <= a => Op::Decimal { precision: a, scale: b },
        4 => Op::Date,
        5 if a <= 6 => Op::Datetime2 { fsp: a },
        6 if a <= 6 => Op::Timestamp2 { fsp: a },
        7 if a <= 6 => Op::Time2 { fsp: a },
        8 => Op::OldTime,
        9 => Op::OldDatetime,
        10 => Op::OldTimestamp,
        11 => Op::Year,
        12 if (1..=4).contains(&a) => Op::Utf8 { len_size: a },
        13 if (1..=4).contains(&a) => Op::Latin1 { len_size: a, pad_to: b },
        14 if (1..=8).contains(&a) => Op::Enum { size: a, members: members.clone() },
        15 if (1..=8).contains(&a) => Op::Set { size: a, members: members.clone() },
        16 if (1..=8).contains(&a) => Op::Bit { nbytes: a },
        17 if (1..=4).contains(&a) => Op::Geometry { len_size: a },
        18 if (1..=4).contains(&a) => Op::Cp1252 { len_size: a },
        _ => return Err(PyValueError::new_err(format!("unsupported column op {:?}", (code, a, b)))),
    })
}

/// Decode one value with a column op (for tests: the same code path as rows events).
#[pyfunction]
fn decode_value<'py>(py: Python<'py>, spec: OpSpec, raw: &[u8]) -> PyResult<(Bound<'py, PyBytes>, usize)> {
    let op = op_from(&spec)?;
    let mut out = Vec::new();
    let end = values::decode(&op, raw, 0, &mut out).map_err(PyValueError::new_err)?;
    Ok((PyBytes::new(py, &out), end))
}

#[pyclass(module = "sluice_binlog")]
struct Stream {
    parser: Parser,
    /// `pipeline.capture.events.EVENT_CLASSES`, and `tuple.__new__` that builds their instances
    classes: Vec<Py<PyAny>>,
    tuple_new: Py<PyAny>,
}

#[pymethods]
impl Stream {
    #[new]
    fn new(py: Python<'_>, checksum: bool, classes: Vec<Py<PyAny>>) -> PyResult<Self> {
        if classes.len() != N_CLASSES {
            return Err(PyValueError::new_err(format!("Stream needs the {} event classes", N_CLASSES)));
        }
        let tuple_new = py.get_type::<PyTuple>().getattr("__new__")?.unbind();
        Ok(Stream { parser: Parser::new(checksum), classes, tuple_new })
    }

    /// Append bytes read from the dump connection.
    fn feed(&mut self, data: &[u8]) {
        self.parser.feed(data);
    }

    /// Bytes fed and not yet parsed.
    fn buffered(&self) -> usize {
        self.parser.buffered()
    }

    /// The table id whose plan `items` waits for, if any.
    fn waiting_for(&self) -> Option<u64> {
        self.parser.waiting_for()
    }

    /// Decide a table id after its table map: `mode` 0 skip, 1 native with `ops` and `keys`
    /// (one per column), 2 raw rows to Python.
    #[pyo3(signature = (table_id, mode, name, ops=None, keys=None))]
    fn set_table(&mut self, table_id: u64, mode: u8, name: String, ops: Option<Vec<OpSpec>>,
                 keys: Option<Vec<Vec<u8>>>) -> PyResult<()> {
        let state = match mode {
            0 => TableState::Skip,
            2 => TableState::Raw,
            1 => {
                let ops = ops.ok_or_else(|| PyValueError::new_err("native mode needs ops"))?;
                let keys = keys.ok_or_else(|| PyValueError::new_err("native mode needs keys"))?;
                if ops.len() != keys.len() {
                    return Err(PyValueError::new_err("ops and keys differ in length"));
                }
                let ops = ops.iter().map(op_from).collect::<PyResult<Vec<_>>>()?;
                TableState::Native(Plan { name, ops, keys })
            }
            _ => return Err(PyValueError::new_err("mode is 0, 1 or 2")),
        };
        self.parser.set_table(table_id, state);
        Ok(())
    }

    /// Up to `limit` items parsed from the bytes fed so far (see the module docs).
    fn items<'py>(&mut self, py: Python<'py>, limit: usize) -> PyResult<Bound<'py, PyList>> {
        let parser = &mut self.parser;
        let mut found = Vec::with_capacity(limit.min(4096));
        let res = py.detach(|| parser.items(limit, &mut found));
        let list = PyList::empty(py);
        for item in found {
            let (class, fields) = to_py(py, item)?;
            list.append(self.tuple_new.call1(py, (&self.classes[class], fields))?)?;
        }
        res.map_err(PyValueError::new_err)?;
        Ok(list)
    }
}

const N_CLASSES: usize = 15;

/// (index in `EVENT_CLASSES`, fields) of one event.
fn to_py(py: Python<'_>, item: Item) -> PyResult<(usize, Bound<'_, PyTuple>)> {
    let b = |v: &[u8]| PyBytes::new(py, v);
    let ob = |v: Option<Vec<u8>>| v.map(|v| PyBytes::new(py, &v));
    Ok(match item {
        Item::Rows { kind, table_id, ts, start, next, nrows, data, old, size, flags, present, present2 } => {
            (0, (kind, table_id, ts, start, next, nrows, b(&data), ob(old), size, flags, b(&present), ob(present2))
                .into_pyobject(py)?)
        }
        Item::RowsRaw { kind, table_id, ts, start, next, rows, present, present2, flags, partial_json } => {
            (1, (kind, table_id, ts, start, next, b(&rows), b(&present), ob(present2), flags, partial_json)
                .into_pyobject(py)?)
        }
        Item::RowsSkip { ts, start, next } => (2, (ts, start, next).into_pyobject(py)?),
        Item::TableMap { table_id, packet, ts, start, next } => {
            (3, (table_id, b(&packet), ts, start, next).into_pyobject(py)?)
        }
        Item::Gtid { ts, start, next, gtid, flags, mariadb, xid } => {
            (4, (ts, start, next, gtid, flags, mariadb, ob(xid)).into_pyobject(py)?)
        }
        Item::Xid { ts, start, next } => (5, (ts, start, next).into_pyobject(py)?),
        Item::Query { ts, start, next, schema, query, status } => {
            (6, (ts, start, next, b(&schema), b(&query), b(&status)).into_pyobject(py)?)
        }
        Item::XaPrepare { ts, start, next, one_phase, xid } => {
            (7, (ts, start, next, one_phase, b(&xid)).into_pyobject(py)?)
        }
        Item::Rotate { ts, pos, file } => (8, (ts, pos, file).into_pyobject(py)?),
        Item::Annotate { ts, sql } => (9, (ts, b(&sql)).into_pyobject(py)?),
        Item::Heartbeat { ts, next } => (10, (ts, next).into_pyobject(py)?),
        Item::Format { ts, start, next, server_version } => {
            (11, (ts, start, next, server_version).into_pyobject(py)?)
        }
        Item::Other { type_code, ts, start, next } => (12, (type_code, ts, start, next).into_pyobject(py)?),
        Item::Eof => (13, PyTuple::empty(py)),
        Item::Err { code, msg } => (14, (code, msg).into_pyobject(py)?),
    })
}

#[pymodule]
fn sluice_binlog(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Stream>()?;
    m.add_function(wrap_pyfunction!(decode_value, m)?)?;
    m.add_function(wrap_pyfunction!(place::kafka_place, m)?)?;
    m.add_function(wrap_pyfunction!(producer::kafka_plan, m)?)?;
    m.add_class::<producer::Plan>()?;
    m.add_class::<producer::TxProducer>()?;
    m.add("KafkaNativeError", m.py().get_type::<producer::KafkaNativeError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("SOURCE_HASH", env!("SLUICE_NATIVE_SOURCE"))?;
    Ok(())
}
