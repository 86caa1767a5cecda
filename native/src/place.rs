//! `kafka_place`: a batch's encoded Dml records grouped into the Kafka messages capture produces.
//!
//! For every record (JSON without its closing `}`) the topic and partition (canal's rules, as
//! `kafka.rs` hashes them), the message value (the record, then `,"batchId":B,"seq":S}`), and per
//! `(topic, partition)` the messages in batch order, built as the `{"value": bytes}` dicts that
//! confluent-kafka's `produce_batch` takes. Scanning and hashing run with the GIL released; only
//! the dicts are built with it held. `pipeline/store/kafka/routing.py` (`Router.place_all`) is the
//! reference and the fallback: a record this scanner cannot place with certainty (rows on several
//! partitions, malformed JSON, a non-string key value) is handed to Python's `fallback(seq)`,
//! whose `(topic, [(partition, record)])` is placed in the record's turn, so order is kept.

use std::collections::{HashMap, HashSet};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::kafka;

/// One `(topic, partition)`'s messages: `(topic, partition, [{"value": bytes}], bytes in values,
/// [(seq, index)] of the DDL records among them)`.
type Group<'py> = (String, i64, Bound<'py, PyList>, usize, Vec<(usize, usize)>);

struct Groups<'py> {
    index: HashMap<(usize, i64), usize>,
    topics: Vec<String>,
    topic_ids: HashMap<String, usize>,
    out: Vec<(usize, i64, Vec<Bound<'py, PyDict>>, usize, Vec<(usize, usize)>)>,
    batch_id: i64,
}

impl<'py> Groups<'py> {
    fn topic_id(&mut self, topic: &str) -> usize {
        if let Some(t) = self.topic_ids.get(topic) {
            return *t;
        }
        self.topics.push(topic.to_string());
        self.topic_ids.insert(topic.to_string(), self.topics.len() - 1);
        self.topics.len() - 1
    }

    fn push(&mut self, py: Python<'py>, topic: usize, part: i64, rec: &[u8], seq: usize, is_ddl: bool) -> PyResult<()> {
        let suffix = format!(",\"batchId\":{},\"seq\":{}}}", self.batch_id, seq);
        let len = rec.len() + suffix.len();
        let value = PyBytes::new_with(py, len, |buf| {
            buf[..rec.len()].copy_from_slice(rec);
            buf[rec.len()..].copy_from_slice(suffix.as_bytes());
            Ok(())
        })?;
        let message = PyDict::new(py);
        message.set_item(intern!(py, "value"), value)?;
        let g = match self.index.get(&(topic, part)) {
            Some(g) => *g,
            None => {
                self.out.push((topic, part, Vec::new(), 0, Vec::new()));
                self.index.insert((topic, part), self.out.len() - 1);
                self.out.len() - 1
            }
        };
        let group = &mut self.out[g];
        if is_ddl {
            group.4.push((seq, group.2.len()));
        }
        group.2.push(message);
        group.3 += len;
        Ok(())
    }
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

/// A batch's messages per `(topic, partition)`, in batch order (see the module docs).
/// `resolve(database, table)` gives `(mode, columns, topic)`: mode 0 partition 0, 1 the table's
/// hash, 2 the key columns' hash (`columns` None: the record's `pkNames`). `fixed_topic`: one
/// topic and one partition for every record (nothing is scanned).
#[pyfunction]
#[pyo3(signature = (lines, ddl, batch_id, partitions, database_hash, resolve, fallback, fixed_topic=None))]
#[allow(clippy::too_many_arguments)]
pub fn kafka_place<'py>(py: Python<'py>, lines: Vec<PyBackedBytes>, ddl: HashSet<usize>, batch_id: i64,
                        partitions: i64, database_hash: bool, resolve: Bound<'py, PyAny>,
                        fallback: Bound<'py, PyAny>, fixed_topic: Option<String>) -> PyResult<Vec<Group<'py>>> {
    let mut is_ddl = vec![false; lines.len()];
    for i in ddl.into_iter().filter(|i| *i < lines.len()) {
        is_ddl[i] = true;
    }
    let mut groups = Groups { index: HashMap::new(), topics: Vec::new(), topic_ids: HashMap::new(),
                              out: Vec::new(), batch_id };
    if let Some(topic) = fixed_topic {
        let t = groups.topic_id(&topic);
        for (i, line) in lines.iter().enumerate() {
            groups.push(py, t, 0, line, i, is_ddl[i])?;
        }
        return finish(py, groups);
    }
    let heads: Vec<Option<kafka::Head>> = py.allow_threads(|| lines.iter().map(|l| kafka::head(l)).collect());
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
                table_topic.push(groups.topic_id(&topic));
                index.entry(h.database.clone()).or_default().insert(h.table.clone(), rules.len() - 1);
                rules.len() - 1
            }
        };
        which.push(t as i64);
    }
    let parts = py.allow_threads(|| partitions_of(&lines, &heads, &which, &rules, &is_ddl, partitions, database_hash));
    for (i, line) in lines.iter().enumerate() {
        if which[i] >= 0 && parts[i] >= 0 {
            groups.push(py, table_topic[which[i] as usize], parts[i], line, i, is_ddl[i])?;
            continue;
        }
        let (topic, placed): (String, Vec<(i64, PyBackedBytes)>) = fallback.call1((i,))?.extract()?;
        let t = groups.topic_id(&topic);
        for (part, rec) in placed {
            groups.push(py, t, part, &rec, i, is_ddl[i])?;
        }
    }
    finish(py, groups)
}

fn finish<'py>(py: Python<'py>, groups: Groups<'py>) -> PyResult<Vec<Group<'py>>> {
    let Groups { topics, out, .. } = groups;
    out.into_iter()
        .map(|(t, part, messages, size, marks)| Ok((topics[t].clone(), part, PyList::new(py, messages)?, size, marks)))
        .collect()
}
