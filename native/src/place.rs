//! A batch's encoded Dml records placed into the Kafka messages capture produces.
//!
//! For every record (JSON without its closing `}`) the topic and partition (canal's rules, as
//! `kafka.rs` hashes them) and the message value (the record, then `,"batchId":B,"seq":S}`), in
//! batch order (`place_all`). Scanning and hashing run with the GIL released. `producer.rs`
//! (`kafka_plan`) lays the values in one buffer for the native producer; `kafka_place` builds
//! each `(topic, partition)`'s messages as the `{"value": bytes}` dicts confluent-kafka's
//! `produce_batch` takes (its producer is the fallback: TLS/SASL settings).
//! `pipeline/store/kafka/routing.py` (`Router.place_all`) is the reference and the fallback: a
//! record this scanner cannot place with certainty (rows on several partitions, malformed JSON,
//! a non-string key value) is handed to Python's `fallback(seq)`, whose `(topic, [(partition,
//! record)])` is placed in the record's turn, so order is kept.

use std::collections::{HashMap, HashSet};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::kafka;

/// One `(topic, partition)`'s messages: `(topic, partition, [{"value": bytes}], bytes in values,
/// [(seq, index)] of the DDL records among them)`.
type Group<'py> = (String, i64, Bound<'py, PyList>, usize, Vec<(usize, usize)>);
/// A `Group` being built: its topic's index, and its messages as a vector.
type Pending<'py> = (usize, i64, Vec<Bound<'py, PyDict>>, usize, Vec<(usize, usize)>);

/// Where one message's record comes from: the batch's own line, or a record Python built (a
/// split multi-row record).
pub enum Body {
    Line(usize),
    Owned(Vec<u8>),
}

/// One message of a batch, in batch order: its topic (an index into `Placement::topics`),
/// partition, record and the record's seq.
pub struct Placed {
    pub topic: usize,
    pub part: i64,
    pub seq: usize,
    pub body: Body,
}

/// A batch's messages (batch order) and the topics they name.
pub struct Placement {
    pub topics: Vec<String>,
    topic_ids: HashMap<String, usize>,
    pub messages: Vec<Placed>,
}

impl Placement {
    fn topic_id(&mut self, topic: &str) -> usize {
        if let Some(t) = self.topic_ids.get(topic) {
            return *t;
        }
        self.topics.push(topic.to_string());
        self.topic_ids.insert(topic.to_string(), self.topics.len() - 1);
        self.topics.len() - 1
    }
}

/// The message value of a record: the record, then `,"batchId":B,"seq":S}`.
pub fn suffix(batch_id: i64, seq: usize) -> String {
    format!(",\"batchId\":{},\"seq\":{}}}", batch_id, seq)
}

/// The partition of each record (`which[i]`: its table's index, -1 unreadable), -1 where Python
/// must place it. `rules[t]`: `(mode, columns)` as `resolve` gave them.
fn partitions_of(lines: &[PyBackedBytes], heads: &[Option<kafka::Head>], which: &[i64],
                 rules: &[(u8, Option<Vec<String>>)], ddl: &[bool], partitions: i64,
                 database_hash: bool) -> Vec<i64> {
    let mut db_hashes: HashMap<&str, i32> = HashMap::new();
    heads.iter().enumerate().map(|(i, h)| {
        let Some(h) = h else { return -1 };
        if ddl[i] {
            return 0;
        }
        let (mode, cols) = &rules[which[i] as usize];
        match mode {
            1 => kafka::bucket(kafka::java_hash(&h.table), partitions),
            2 => {
                let base = if database_hash {
                    *db_hashes.entry(h.database.as_str()).or_insert_with(|| kafka::java_hash(&h.database))
                } else {
                    0
                };
                let cols = cols.as_ref().unwrap_or(&h.pk_names);
                match kafka::row_hashes(&lines[i], h, cols, base) {
                    None => -1,
                    Some(hs) if hs.is_empty() => 0,
                    Some(hs) => {
                        let first = kafka::bucket(hs[0], partitions);
                        if hs.iter().all(|k| kafka::bucket(*k, partitions) == first) { first } else { -1 }
                    }
                }
            }
            _ => 0,
        }
    }).collect()
}

/// A batch's messages in batch order (see the module docs). `resolve(database, table)` gives
/// `(mode, columns, topic)`: mode 0 partition 0, 1 the table's hash, 2 the key columns' hash
/// (`columns` None: the record's `pkNames`). `fixed_topic`: one topic and one partition for every
/// record (nothing is scanned).
#[allow(clippy::too_many_arguments)]
pub fn place_all(py: Python<'_>, lines: &[PyBackedBytes], partitions: i64, database_hash: bool,
                 is_ddl: &[bool], resolve: &Bound<'_, PyAny>, fallback: &Bound<'_, PyAny>,
                 fixed_topic: Option<String>) -> PyResult<Placement> {
    let mut out = Placement { topics: Vec::new(), topic_ids: HashMap::new(), messages: Vec::with_capacity(lines.len()) };
    if let Some(topic) = fixed_topic {
        let t = out.topic_id(&topic);
        out.messages.extend((0..lines.len()).map(|i| Placed { topic: t, part: 0, seq: i, body: Body::Line(i) }));
        return Ok(out);
    }
    let heads: Vec<Option<kafka::Head>> = py.detach(|| lines.iter().map(|l| kafka::head(l)).collect());
    let mut index: HashMap<String, HashMap<String, usize>> = HashMap::new();
    let mut rules: Vec<(u8, Option<Vec<String>>)> = Vec::new();
    let mut table_topic: Vec<usize> = Vec::new();
    let mut which: Vec<i64> = Vec::with_capacity(heads.len());
    for h in &heads {
        let Some(h) = h else { which.push(-1); continue };
        let known = index.get(h.database.as_str()).and_then(|tables| tables.get(h.table.as_str()));
        let t = match known {
            Some(t) => *t,
            None => {
                let (mode, cols, topic): (u8, Option<Vec<String>>, String) =
                    resolve.call1((h.database.as_str(), h.table.as_str()))?.extract()?;
                rules.push((mode, cols));
                table_topic.push(out.topic_id(&topic));
                index.entry(h.database.clone()).or_default().insert(h.table.clone(), rules.len() - 1);
                rules.len() - 1
            }
        };
        which.push(t as i64);
    }
    let parts = py.detach(|| partitions_of(lines, &heads, &which, &rules, is_ddl, partitions, database_hash));
    for i in 0..lines.len() {
        if which[i] >= 0 && parts[i] >= 0 {
            out.messages.push(Placed { topic: table_topic[which[i] as usize], part: parts[i], seq: i, body: Body::Line(i) });
            continue;
        }
        let (topic, placed): (String, Vec<(i64, PyBackedBytes)>) = fallback.call1((i,))?.extract()?;
        let t = out.topic_id(&topic);
        for (part, rec) in placed {
            out.messages.push(Placed { topic: t, part, seq: i, body: Body::Owned(rec.to_vec()) });
        }
    }
    Ok(out)
}

/// `is_ddl[seq]` for a batch of `n` records whose DDL records are `ddl`.
pub fn ddl_flags(n: usize, ddl: HashSet<usize>) -> Vec<bool> {
    let mut is_ddl = vec![false; n];
    for i in ddl.into_iter().filter(|i| *i < n) {
        is_ddl[i] = true;
    }
    is_ddl
}

/// A batch's messages per `(topic, partition)`, in batch order, as the `{"value": bytes}` dicts
/// of confluent-kafka's `produce_batch` (see the module docs and `place_all`).
#[pyfunction]
#[pyo3(signature = (lines, ddl, batch_id, partitions, database_hash, resolve, fallback, fixed_topic=None))]
#[allow(clippy::too_many_arguments)]
pub fn kafka_place<'py>(py: Python<'py>, lines: Vec<PyBackedBytes>, ddl: HashSet<usize>, batch_id: i64,
                        partitions: i64, database_hash: bool, resolve: Bound<'py, PyAny>,
                        fallback: Bound<'py, PyAny>, fixed_topic: Option<String>) -> PyResult<Vec<Group<'py>>> {
    let is_ddl = ddl_flags(lines.len(), ddl);
    let placement = place_all(py, &lines, partitions, database_hash, &is_ddl, &resolve, &fallback, fixed_topic)?;
    let mut index: HashMap<(usize, i64), usize> = HashMap::new();
    let mut out: Vec<Pending<'py>> = Vec::new();
    for m in &placement.messages {
        let rec: &[u8] = match &m.body {
            Body::Line(i) => &lines[*i],
            Body::Owned(v) => v,
        };
        let tail = suffix(batch_id, m.seq);
        let len = rec.len() + tail.len();
        let value = PyBytes::new_with(py, len, |buf| {
            buf[..rec.len()].copy_from_slice(rec);
            buf[rec.len()..].copy_from_slice(tail.as_bytes());
            Ok(())
        })?;
        let message = PyDict::new(py);
        message.set_item(intern!(py, "value"), value)?;
        let g = *index.entry((m.topic, m.part)).or_insert_with(|| {
            out.push((m.topic, m.part, Vec::new(), 0, Vec::new()));
            out.len() - 1
        });
        let group = &mut out[g];
        if is_ddl[m.seq] {
            group.4.push((m.seq, group.2.len()));
        }
        group.2.push(message);
        group.3 += len;
    }
    let topics = placement.topics;
    out.into_iter()
        .map(|(t, part, messages, size, marks)| Ok((topics[t].clone(), part, PyList::new(py, messages)?, size, marks)))
        .collect()
}
