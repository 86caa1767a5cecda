//! `TxProducer`: capture's transactional Kafka producer, librdkafka driven from Rust (the
//! `rdkafka` crate), so that a batch's messages are built and queued with the GIL released and
//! without a Python object per message.
//!
//! `kafka_plan` places a batch (the same rules as `kafka_place`, `place.rs`) into a `Plan`;
//! `TxProducer.produce_plan` queues a slice of it, `flush` waits for the broker's acks and
//! `take_reports` hands back what the delivery reports said: the last offset per
//! `(topic, partition)`, the offsets of the messages produced with a mark (the DDL records, the
//! batch record) and the first delivery error. The transaction calls are librdkafka's. Every
//! error is raised as `KafkaNativeError(code, name, reason, fatal, retriable, txn_requires_abort)`
//! (`code` librdkafka's, the numbers of confluent-kafka's `KafkaError`), which
//! `pipeline/store/kafka/txnative.py` turns into confluent-kafka's `KafkaException`.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::bindings as rdsys;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Message};

use crate::place::{self, Body};

create_exception!(sluice_binlog, KafkaNativeError, PyException);

/// A batch's messages, their values laid end to end in one buffer (see the module docs).
#[pyclass(frozen)]
pub struct Plan {
    #[pyo3(get)]
    topics: Vec<String>,
    /// `(topic, partition, end of the value in buf, mark + 1 or 0)`
    messages: Vec<(usize, i32, usize, usize)>,
    buf: Vec<u8>,
}

#[pymethods]
impl Plan {
    fn __len__(&self) -> usize {
        self.messages.len()
    }

    /// The bytes of all message values.
    #[getter]
    fn size(&self) -> usize {
        self.buf.len()
    }
}

/// A batch's `Plan`: `kafka_place`'s arguments; the DDL records (`ddl`, their seqs) are marked
/// with their seq.
#[pyfunction]
#[pyo3(signature = (lines, ddl, batch_id, partitions, database_hash, resolve, fallback, fixed_topic=None))]
#[allow(clippy::too_many_arguments)]
pub fn kafka_plan(py: Python<'_>, lines: Vec<PyBackedBytes>, ddl: HashSet<usize>, batch_id: i64, partitions: i64,
                  database_hash: bool, resolve: Bound<'_, PyAny>, fallback: Bound<'_, PyAny>,
                  fixed_topic: Option<String>) -> PyResult<Plan> {
    let is_ddl = place::ddl_flags(lines.len(), ddl);
    let placement = place::place_all(py, &lines, partitions, database_hash, &is_ddl, &resolve, &fallback, fixed_topic)?;
    let topics = placement.topics;
    let placed = placement.messages;
    Ok(py.detach(|| {
        let total: usize = placed.iter().map(|m| match &m.body {
            Body::Line(i) => lines[*i].len() + 32,
            Body::Owned(v) => v.len() + 32,
        }).sum();
        let mut buf = Vec::with_capacity(total);
        let mut messages = Vec::with_capacity(placed.len());
        for m in &placed {
            match &m.body {
                Body::Line(i) => buf.extend_from_slice(&lines[*i]),
                Body::Owned(v) => buf.extend_from_slice(v),
            }
            buf.extend_from_slice(place::suffix(batch_id, m.seq).as_bytes());
            messages.push((m.topic, m.part as i32, buf.len(), if is_ddl[m.seq] { m.seq + 1 } else { 0 }));
        }
        Plan { topics, messages, buf }
    }))
}

#[derive(Default)]
struct Reports {
    /// the highest offset acked per topic and partition
    last: HashMap<String, HashMap<i32, i64>>,
    /// `(mark, topic, partition, offset)`
    marks: Vec<(usize, String, i32, i64)>,
    error: Option<ErrorInfo>,
}

type ErrorInfo = (i32, String, String, bool, bool, bool);

struct Ctx {
    reports: Mutex<Reports>,
    /// the last error event printed (the crate hands each one to `error` twice)
    last_error: Mutex<String>,
}

impl ClientContext for Ctx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        if (level as i32) <= (RDKafkaLogLevel::Warning as i32) {
            eprintln!("%{}|{}|rdkafka#native-producer| {}", level as i32, fac, message);
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let text = format!("{error}: {reason}");
        let mut last = self.last_error.lock().unwrap_or_else(|e| e.into_inner());
        if *last != text {
            eprintln!("%3|ERROR|rdkafka#native-producer| {text}");
            *last = text;
        }
    }
}

impl ProducerContext for Ctx {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, mark: usize) {
        let mut r = self.reports.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(m) => {
                let (topic, part, off) = (m.topic(), m.partition(), m.offset());
                let parts = match r.last.get_mut(topic) {
                    Some(parts) => parts,
                    None => r.last.entry(topic.to_string()).or_default(),
                };
                let last = parts.entry(part).or_insert(off);
                *last = (*last).max(off);
                if mark > 0 {
                    r.marks.push((mark - 1, topic.to_string(), part, off));
                }
            }
            Err((e, _)) => {
                if r.error.is_none() {
                    r.error = Some(info(e));
                }
            }
        }
    }
}

fn info(e: &KafkaError) -> ErrorInfo {
    match e {
        KafkaError::Transaction(t) => {
            let code = t.code();
            (code as i32, format!("{code:?}"), t.string(), t.is_fatal(), t.is_retriable(), t.txn_requires_abort())
        }
        other => {
            let code = other.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail);
            (code as i32, format!("{code:?}"), other.to_string(), false, false, false)
        }
    }
}

fn raise(e: KafkaError) -> PyErr {
    KafkaNativeError::new_err(info(&e))
}

/// The producer's fatal error (fenced, say) when it has one -- the cause of whatever failed
/// after it (purged messages, refused sends) -- else `other`.
fn fatal_or(inner: &ThreadedProducer<Ctx>, other: ErrorInfo) -> ErrorInfo {
    match inner.client().fatal_error() {
        Some((code, reason)) => (code as i32, format!("{code:?}"), reason, true, false, false),
        None => other,
    }
}

fn timeout(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds.max(0.0))
}

/// The transactional producer (see the module docs).
#[pyclass(frozen)]
pub struct TxProducer {
    inner: ThreadedProducer<Ctx>,
}

#[pymethods]
impl TxProducer {
    /// A producer with these librdkafka settings (`key`, `value` pairs).
    #[new]
    fn new(settings: Vec<(String, String)>) -> PyResult<Self> {
        let mut config = ClientConfig::new();
        for (k, v) in settings {
            config.set(k, v);
        }
        let inner = config
            .create_with_context(Ctx { reports: Mutex::new(Reports::default()), last_error: Mutex::new(String::new()) })
            .map_err(raise)?;
        Ok(TxProducer { inner })
    }

    fn init_transactions(&self, py: Python<'_>, seconds: f64) -> PyResult<()> {
        py.detach(|| self.inner.init_transactions(timeout(seconds))).map_err(raise)
    }

    fn begin_transaction(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.begin_transaction()).map_err(raise)
    }

    fn commit_transaction(&self, py: Python<'_>, seconds: f64) -> PyResult<()> {
        py.detach(|| self.inner.commit_transaction(timeout(seconds))).map_err(raise)
    }

    fn abort_transaction(&self, py: Python<'_>, seconds: f64) -> PyResult<()> {
        py.detach(|| self.inner.abort_transaction(timeout(seconds))).map_err(raise)
    }

    /// Queue messages `[start, stop)` of `plan`, in order, waiting while the local queue is full.
    fn produce_plan(&self, py: Python<'_>, plan: &Plan, start: usize, stop: usize) -> PyResult<()> {
        let stop = stop.min(plan.messages.len());
        py.detach(|| {
            for i in start..stop {
                let (topic, part, end, mark) = plan.messages[i];
                let begin = if i == 0 { 0 } else { plan.messages[i - 1].2 };
                self.send(&plan.topics[topic], part, &plan.buf[begin..end], mark)?;
            }
            Ok(())
        })
    }

    /// Queue one message; `mark`: report its offset under this number.
    #[pyo3(signature = (topic, partition, value, mark=None))]
    fn produce(&self, py: Python<'_>, topic: &str, partition: i32, value: &[u8], mark: Option<usize>) -> PyResult<()> {
        py.detach(|| self.send(topic, partition, value, mark.map_or(0, |m| m + 1)))
    }

    /// Send what is queued now (linger.ms does not apply while flushing) and wait until every
    /// message was acked and its delivery report served, or `seconds` passed; the count left.
    /// librdkafka's own flush: the crate's serves the reports in 100 ms slices, while here the
    /// producer's polling thread serves them as they come.
    fn flush(&self, py: Python<'_>, seconds: f64) -> i32 {
        let ms = (seconds.max(0.0) * 1000.0).min(i32::MAX as f64) as i32;
        let ptr = self.inner.client().native_ptr() as usize;
        py.detach(|| {
            // SAFETY: the handle lives as long as `self`; rd_kafka_flush is thread-safe
            unsafe { rdsys::rd_kafka_flush(ptr as *mut rdsys::rd_kafka_t, ms) };
            self.inner.in_flight_count()
        })
    }

    /// What the delivery reports said since the last call (see the module docs): `(last,
    /// marks, error)`, `last` as `[(topic, partition, offset)]`, `marks` as `[(mark, topic,
    /// partition, offset)]`, `error` None or the `KafkaNativeError` arguments.
    #[allow(clippy::type_complexity)]
    fn take_reports(&self) -> (Vec<(String, i32, i64)>, Vec<(usize, String, i32, i64)>, Option<ErrorInfo>) {
        let mut r = self.inner.context().reports.lock().unwrap_or_else(|e| e.into_inner());
        let taken = std::mem::take(&mut *r);
        drop(r);
        let last = taken.last.into_iter()
            .flat_map(|(topic, parts)| parts.into_iter().map(move |(p, o)| (topic.clone(), p, o)))
            .collect();
        (last, taken.marks, taken.error.map(|e| fatal_or(&self.inner, e)))
    }

    fn __len__(&self) -> usize {
        self.inner.in_flight_count().max(0) as usize
    }
}

impl TxProducer {
    fn send(&self, topic: &str, partition: i32, value: &[u8], mark: usize) -> PyResult<()> {
        let mut record = BaseRecord::<(), [u8], usize>::with_opaque_to(topic, mark).partition(partition).payload(value);
        loop {
            match self.inner.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back; // the polling thread frees the queue as reports come
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err((e, _)) => {
                    // a failed delivery makes the transaction abortable and every later send fail
                    // (_STATE): report the delivery's error, the cause, when there is one
                    let earlier = self.inner.context().reports.lock().unwrap_or_else(|p| p.into_inner()).error.clone();
                    return Err(KafkaNativeError::new_err(fatal_or(&self.inner, earlier.unwrap_or_else(|| info(&e)))));
                }
            }
        }
    }
}
