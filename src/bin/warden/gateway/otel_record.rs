//! The kernel's span record (`warden::telemetry::ActionSpan`) given to the OpenTelemetry Rust
//! SDK: the span's attributes, events, status and end, and the record's measurements into a
//! meter's instruments. Depends on the library's public API and the `opentelemetry` API only, so
//! `benches/telemetry.rs` measures this very code (it includes the file).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::metrics::{Counter, Histogram, Meter};
use opentelemetry::trace::{SpanRef, Status};
use opentelemetry::KeyValue;
use warden::telemetry::{ActionSpan, AttributeValue, Instrument, Measurement, SpanStatus};

/// The histograms' bucket boundaries, in seconds (a call's latency, a human's wait).
pub const SECONDS: [f64; 18] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0];

/// The attributes an `execute_tool` span has from its creation (the conventions set them when
/// the span starts); the rest are set when it ends, each once.
pub const AT_START: [&str; 2] = ["gen_ai.operation.name", "gen_ai.tool.name"];

/// A kernel time as the SDK's.
pub fn time(at: warden::Micros) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(u64::try_from(at).unwrap_or(0))
}

/// One attribute as the SDK's.
pub fn key_value(key: &'static str, value: &AttributeValue) -> KeyValue {
    match value {
        AttributeValue::Str(text) => KeyValue::new(key, text.clone()),
        AttributeValue::Int(n) => KeyValue::new(key, *n),
        AttributeValue::Double(x) => KeyValue::new(key, *x),
        AttributeValue::Bool(b) => KeyValue::new(key, *b),
    }
}

/// One attribute as the SDK's, its text moved rather than copied.
fn into_key_value(key: &'static str, value: AttributeValue) -> KeyValue {
    match value {
        AttributeValue::Str(text) => KeyValue::new(key, text),
        AttributeValue::Int(n) => KeyValue::new(key, n),
        AttributeValue::Double(x) => KeyValue::new(key, x),
        AttributeValue::Bool(b) => KeyValue::new(key, b),
    }
}

/// The attributes the span starts with.
pub fn start_attributes(record: &ActionSpan) -> Vec<KeyValue> {
    record
        .attributes
        .iter()
        .filter(|(key, _)| AT_START.contains(key))
        .map(|(key, value)| key_value(key, value))
        .collect()
}

/// The span started with `start_attributes` ends as the complete record says: the other
/// attributes (set at once: the span's lock is taken once), the events at their times, the
/// status, the end time. The record is consumed: its texts move into the span.
pub fn complete(span: &SpanRef<'_>, record: ActionSpan) {
    let end = time(record.end.unwrap_or(record.start));
    span.set_attributes(
        record
            .attributes
            .into_iter()
            .filter(|(key, _)| !AT_START.contains(key))
            .map(|(key, value)| into_key_value(key, value)),
    );
    for event in record.events {
        let attributes: Vec<KeyValue> = event.attributes.into_iter().map(|(k, v)| into_key_value(k, v)).collect();
        span.add_event_with_timestamp(event.name, time(event.at), attributes);
    }
    if let SpanStatus::Error(description) = record.status {
        span.set_status(Status::error(description));
    }
    span.end_with_timestamp(end);
}

/// The record's instruments in one meter, each made on its first measurement.
pub struct Instruments {
    pub meter: Meter,
    counters: Mutex<HashMap<&'static str, Counter<u64>>>,
    histograms: Mutex<HashMap<&'static str, Histogram<f64>>>,
}

impl Instruments {
    pub fn new(meter: Meter) -> Instruments {
        Instruments { meter, counters: Mutex::new(HashMap::new()), histograms: Mutex::new(HashMap::new()) }
    }

    /// Record the measurements of an ended call (taken out of its record: their texts move).
    pub fn measure(&self, measurements: Vec<Measurement>) {
        for measurement in measurements {
            let attributes: Vec<KeyValue> =
                measurement.attributes.into_iter().map(|(k, v)| into_key_value(k, v)).collect();
            match measurement.instrument {
                Instrument::Counter => {
                    let Ok(mut counters) = self.counters.lock() else { continue };
                    let counter = counters.entry(measurement.name).or_insert_with(|| {
                        self.meter
                            .u64_counter(measurement.name)
                            .with_unit(measurement.unit)
                            .with_description(measurement.description)
                            .build()
                    });
                    counter.add(measurement.value as u64, &attributes);
                }
                Instrument::Histogram => {
                    let Ok(mut histograms) = self.histograms.lock() else { continue };
                    let histogram = histograms.entry(measurement.name).or_insert_with(|| {
                        self.meter
                            .f64_histogram(measurement.name)
                            .with_unit(measurement.unit)
                            .with_description(measurement.description)
                            .with_boundaries(SECONDS.to_vec())
                            .build()
                    });
                    histogram.record(measurement.value, &attributes);
                }
            }
        }
    }
}
