//! The gateway's OpenTelemetry: each `tools/call` is an MCP server span `tools/call {tool}`,
//! continuing the client's trace from `params._meta.traceparent`; the kernel's span record of
//! the protected call (`warden::telemetry::ActionTrace`, the same `execute_tool` record the
//! bindings export) becomes its child, started when the permit is issued so the request
//! forwarded upstream names it as the parent; the record's measurements and the store's gauges
//! go to one meter, read by an OTLP/HTTP exporter and by the Prometheus text of `--admin`'s
//! `/metrics`.
//!
//! Configured only by the standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_SDK_DISABLED`): with none set nothing
//! is exported and no exporter thread starts. Nothing here reads an argument value or a header
//! value but `Mcp-Session-Id`; the `execute_tool` record is the core's, redacted by the core.
//! docs/TELEMETRY.md, "The gateway", lists every name.

use std::sync::{Arc, Weak};

use serde_json::Value;
use warden::telemetry::ActionTrace;

/// Which exports the environment asks for (pure: the variables are handed in).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Exports {
    /// OTLP/HTTP traces.
    pub traces: bool,
    /// OTLP/HTTP metrics.
    pub metrics: bool,
}

/// What `OTEL_*` variables ask for: an endpoint for the signal (its own or the general one),
/// unless `OTEL_SDK_DISABLED=true`. A protocol other than `http/protobuf` is refused.
pub fn exports(var: &dyn Fn(&str) -> Option<String>) -> Result<Exports, String> {
    let set = |name: &str| var(name).is_some_and(|value| !value.trim().is_empty());
    if var("OTEL_SDK_DISABLED").is_some_and(|value| value.trim().eq_ignore_ascii_case("true")) {
        return Ok(Exports::default());
    }
    let exports = Exports {
        traces: set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        metrics: set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
    };
    for name in
        ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"]
    {
        if let Some(protocol) = var(name).filter(|p| !p.trim().is_empty() && p.trim() != "http/protobuf") {
            return Err(format!(
                "{name}={}: warden gateway exports OTLP over HTTP with protobuf only (http/protobuf)",
                super::log::printable(&protocol.chars().take(64).collect::<String>())
            ));
        }
    }
    Ok(exports)
}

/// The most characters of a client's text (tool name, request id, session id) a span holds: the
/// call is not checked yet when its span starts.
pub const MAX_TEXT_CHARS: usize = 256;

/// `text`, cut to `MAX_TEXT_CHARS` characters.
pub fn bounded(text: &str) -> String {
    text.chars().take(MAX_TEXT_CHARS).collect()
}

/// The MCP span attributes of one `tools/call` (pure): `mcp.method.name`, `gen_ai.tool.name`,
/// `gen_ai.operation.name`, `jsonrpc.request.id`, `mcp.session.id` when the call has one,
/// `mcp.protocol.version`.
#[cfg_attr(not(feature = "otel"), allow(dead_code))]
pub fn call_attributes(tool: &str, id: &Value, session: Option<&str>, revision: &str) -> Vec<(&'static str, String)> {
    let mut attributes = vec![
        ("mcp.method.name", "tools/call".to_owned()),
        ("gen_ai.tool.name", bounded(tool)),
        ("gen_ai.operation.name", "execute_tool".to_owned()),
    ];
    match id {
        Value::String(text) => attributes.push(("jsonrpc.request.id", bounded(text))),
        Value::Number(number) => attributes.push(("jsonrpc.request.id", bounded(&number.to_string()))),
        _ => {}
    }
    if let Some(session) = session.filter(|s| !s.is_empty()) {
        attributes.push(("mcp.session.id", bounded(session)));
    }
    if !revision.is_empty() {
        attributes.push(("mcp.protocol.version", bounded(revision)));
    }
    attributes
}

/// How a `tools/call` ended, as its MCP span says: `None` for a result the client gets as a
/// success; otherwise `error.type` (the JSON-RPC error code, or `tool_error` for a result with
/// `isError`, or the receipt's `ambiguous`/`failed`) and the status description (a fixed token,
/// never a message: messages may quote what the client sent).
#[cfg_attr(not(feature = "otel"), allow(dead_code))]
pub fn call_error(body: Option<&Value>, result: Option<&str>) -> Option<(String, String)> {
    if let Some(error) = body.and_then(|b| b.get("error")) {
        let code = error.get("code").and_then(Value::as_i64).map_or_else(|| "error".to_owned(), |c| c.to_string());
        let token = error
            .get("data")
            .and_then(|d| d.get("error"))
            .and_then(Value::as_str)
            .map_or_else(|| format!("JSON-RPC error {code}"), str::to_owned);
        return Some((code, token));
    }
    match result {
        Some("ambiguous") => return Some(("ambiguous".into(), "the outcome is unknown (AMBIGUOUS)".into())),
        Some("failed") => return Some(("not_executed".into(), "the effect was not executed (FAILED)".into())),
        _ => {}
    }
    if body.and_then(|b| b.get("result")).and_then(|r| r.get("isError")) == Some(&Value::Bool(true)) {
        return Some(("tool_error".into(), "the tool answered isError".into()));
    }
    None
}

#[cfg(feature = "otel")]
pub use otel::{CallSpan, InFlight, Telemetry};

#[cfg(not(feature = "otel"))]
pub use off::{CallSpan, InFlight, Telemetry};

/// Reads the store's gauges (`warden::telemetry::gauges`) for a collection.
pub type GaugeSource = Weak<super::intercept::Engine>;

#[cfg(feature = "otel")]
mod otel {
    use std::collections::HashMap;

    use opentelemetry::metrics::{Histogram, MeterProvider as _};
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _};
    use opentelemetry::{Context, KeyValue};
    use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
    use opentelemetry_sdk::metrics::SdkMeterProvider;
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
    use opentelemetry_sdk::Resource;
    use std::time::Duration;

    use super::super::otel_record::{complete, key_value, start_attributes, time, Instruments, SECONDS};
    use super::{call_attributes, call_error, exports, ActionTrace, Arc, GaugeSource, Value};

    /// The instrumentation scope of every span and instrument.
    const SCOPE: &str = "warden";

    /// The service name when `OTEL_SERVICE_NAME` (or `service.name` in
    /// `OTEL_RESOURCE_ATTRIBUTES`) does not give one.
    const SERVICE: &str = "warden-gateway";

    /// The gateway's tracer and meter, or nothing at all.
    pub struct Telemetry {
        tracer: Option<(SdkTracer, SdkTracerProvider)>,
        meters: Option<Meters>,
        /// `/metrics`: the registry the Prometheus reader fills at each scrape.
        registry: Option<prometheus::Registry>,
    }

    struct Meters {
        provider: SdkMeterProvider,
        instruments: Instruments,
        /// `mcp.server.operation.duration`: every `tools/call`, refused before the kernel or not.
        operations: Histogram<f64>,
    }

    /// The MCP span of one `tools/call` (in its context), and when it began.
    pub struct CallSpan {
        cx: Option<Context>,
        started: std::time::Instant,
        tool: String,
    }

    /// The `execute_tool` span of a protected call whose permit was issued: started, in its
    /// context, and the kernel's record it is completed from.
    pub struct InFlight {
        cx: Option<Context>,
        trace: Arc<ActionTrace>,
    }

    /// An OTLP HTTP client over the ureq Warden already builds: no proxy from the environment,
    /// no redirects, statuses as responses, one deadline per export, the Mozilla roots.
    #[derive(Debug)]
    struct Ureq(ureq::Agent);

    /// The largest OTLP response body read (the exporter reads only the status).
    const MAX_RESPONSE_BYTES: u64 = 4 * 1024 * 1024;

    impl Ureq {
        fn new() -> Ureq {
            let config = ureq::Agent::config_builder()
                .proxy(None)
                .max_redirects(0)
                .max_redirects_will_error(false)
                .http_status_as_error(false)
                .https_only(false)
                .timeout_global(Some(Duration::from_secs(10)))
                .build();
            Ureq(config.new_agent())
        }
    }

    #[async_trait::async_trait]
    impl opentelemetry_http::HttpClient for Ureq {
        async fn send_bytes(
            &self,
            request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
        ) -> Result<opentelemetry_http::Response<opentelemetry_http::Bytes>, opentelemetry_http::HttpError> {
            // The SDK's export threads drive this future with a blocking executor: the request
            // runs on that thread, as the SDK's own blocking client does.
            let (parts, body) = request.into_parts();
            let request = opentelemetry_http::Request::from_parts(parts, body.to_vec());
            let mut response = self.0.run(request)?;
            let bytes = response.body_mut().with_config().limit(MAX_RESPONSE_BYTES).read_to_vec()?;
            let (parts, _) = response.into_parts();
            Ok(opentelemetry_http::Response::from_parts(parts, opentelemetry_http::Bytes::from(bytes)))
        }
    }

    fn resource() -> Resource {
        let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|name| !name.trim().is_empty())
            || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|attributes| attributes.contains("service.name="));
        let builder = Resource::builder();
        if named {
            builder.build()
        } else {
            builder.with_service_name(SERVICE).build()
        }
    }

    impl Telemetry {
        /// No span, no instrument.
        pub fn off() -> Telemetry {
            Telemetry { tracer: None, meters: None, registry: None }
        }

        /// What the `OTEL_*` variables ask for, plus a Prometheus reader when `prometheus`
        /// (`--admin`). Nothing starts when neither asks.
        pub fn from_env(prometheus: bool) -> Result<Telemetry, String> {
            let wanted = exports(&|name| std::env::var(name).ok())?;
            let resource = resource();
            let tracer = if wanted.traces {
                let exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .with_http_client(Ureq::new())
                    .build()
                    .map_err(|e| format!("the OTLP span exporter could not be built: {e}"))?;
                let provider =
                    SdkTracerProvider::builder().with_resource(resource.clone()).with_batch_exporter(exporter).build();
                Some((provider.tracer(SCOPE), provider))
            } else {
                None
            };
            let registry = prometheus.then(prometheus::Registry::new);
            let meters = if wanted.metrics || registry.is_some() {
                let mut builder = SdkMeterProvider::builder().with_resource(resource);
                if wanted.metrics {
                    let exporter = opentelemetry_otlp::MetricExporter::builder()
                        .with_http()
                        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                        .with_http_client(Ureq::new())
                        .build()
                        .map_err(|e| format!("the OTLP metric exporter could not be built: {e}"))?;
                    builder =
                        builder.with_reader(opentelemetry_sdk::metrics::PeriodicReader::builder(exporter).build());
                }
                if let Some(registry) = &registry {
                    let reader = opentelemetry_prometheus::exporter()
                        .with_registry(registry.clone())
                        .build()
                        .map_err(|e| format!("the Prometheus reader could not be built: {e}"))?;
                    builder = builder.with_reader(reader);
                }
                let provider = builder.build();
                let meter = provider.meter(SCOPE);
                let operations = meter
                    .f64_histogram("mcp.server.operation.duration")
                    .with_unit("s")
                    .with_description("How long the gateway took to answer an MCP request")
                    .with_boundaries(SECONDS.to_vec())
                    .build();
                Some(Meters { provider, instruments: Instruments::new(meter), operations })
            } else {
                None
            };
            Ok(Telemetry { tracer, meters, registry })
        }

        /// What the startup block says.
        pub fn summary(&self) -> String {
            let mut exported = Vec::new();
            if self.tracer.is_some() {
                exported.push("traces");
            }
            if self.meters.is_some() && std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
                || std::env::var_os("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT").is_some() && self.meters.is_some()
            {
                exported.push("metrics");
            }
            if exported.is_empty() {
                "off (no OTEL_EXPORTER_OTLP_* endpoint set)".to_owned()
            } else {
                format!("OTLP/HTTP {}", exported.join(" and "))
            }
        }

        /// Whether protected calls need a trace (a span or a measurement is made of it).
        pub fn wants_trace(&self) -> Option<Arc<ActionTrace>> {
            (self.tracer.is_some() || self.meters.is_some()).then(ActionTrace::new)
        }

        /// The gauges of the store, read at each collection.
        pub fn register_gauges(&self, source: GaugeSource) {
            let Some(meters) = &self.meters else { return };
            for gauge in warden::telemetry::gauges::GAUGES {
                let source = source.clone();
                let name = gauge.name;
                // The instrument lives in the provider's pipeline: the handle is not needed.
                let _gauge = meters
                    .instruments
                    .meter
                    .i64_observable_gauge(name)
                    .with_unit(gauge.unit)
                    .with_description(gauge.description)
                    .with_callback(move |observer| {
                        let Some(engine) = source.upgrade() else { return };
                        match warden::telemetry::gauges::read(engine.warden.kernel(), name) {
                            Ok(points) => {
                                for point in points {
                                    let attributes: Vec<KeyValue> =
                                        point.attributes.iter().map(|(k, v)| key_value(k, v)).collect();
                                    observer.observe(point.value, &attributes);
                                }
                            }
                            Err(error) => super::super::log::warn(&format!("reading the gauge {name} failed: {error}")),
                        }
                    })
                    .build();
            }
        }

        /// The MCP span of a `tools/call`: a server span, the child of the client's span when
        /// `params._meta` carries a valid `traceparent` (with its `tracestate`).
        pub fn start_call(&self, message: &Value, tool: &str, session: Option<&str>, revision: &str) -> CallSpan {
            let started = std::time::Instant::now();
            let tool = &super::bounded(tool);
            let Some((tracer, _)) = &self.tracer else { return CallSpan { cx: None, started, tool: tool.clone() } };
            let meta = message.get("params").and_then(|p| p.get("_meta"));
            let mut carrier = HashMap::new();
            for key in ["traceparent", "tracestate"] {
                if let Some(text) = meta.and_then(|m| m.get(key)).and_then(Value::as_str) {
                    carrier.insert(key.to_owned(), text.to_owned());
                }
            }
            let parent = TraceContextPropagator::new().extract(&carrier);
            let id = message.get("id").unwrap_or(&Value::Null);
            let attributes: Vec<KeyValue> = call_attributes(tool, id, session, revision)
                .into_iter()
                .map(|(key, value)| KeyValue::new(key, value))
                .collect();
            let span = tracer
                .span_builder(format!("tools/call {tool}"))
                .with_kind(SpanKind::Server)
                .with_attributes(attributes)
                .start_with_context(tracer, &parent);
            CallSpan { cx: Some(parent.with_span(span)), started, tool: tool.to_owned() }
        }

        /// The call's MCP span ends: `body` is what the client is answered (when the gateway
        /// made or knows it), `result` the receipt's result.
        pub fn end_call(&self, call: CallSpan, body: Option<&Value>, result: Option<&str>) {
            let error = call_error(body, result);
            if let Some(meters) = &self.meters {
                let mut attributes = vec![
                    KeyValue::new("mcp.method.name", "tools/call"),
                    KeyValue::new("gen_ai.tool.name", call.tool.clone()),
                ];
                if let Some((kind, _)) = &error {
                    attributes.push(KeyValue::new("error.type", kind.clone()));
                }
                meters.operations.record(call.started.elapsed().as_secs_f64(), &attributes);
            }
            let Some(cx) = call.cx else { return };
            let span = cx.span();
            if let Some((kind, description)) = error {
                span.set_attribute(KeyValue::new("error.type", kind));
                span.set_status(Status::error(description));
            }
            span.end();
        }

        /// The permit was issued: the `execute_tool` span starts (at the record's start, a
        /// child of the MCP span) and the request forwarded upstream names it as its parent
        /// (`params._meta.traceparent`, with the client's `tracestate`).
        pub fn action_started(
            &self,
            call: &CallSpan,
            trace: Option<Arc<ActionTrace>>,
            forward: &mut Value,
        ) -> Option<InFlight> {
            let trace = trace?;
            let (Some((tracer, _)), Some(parent)) = (&self.tracer, &call.cx) else {
                return Some(InFlight { cx: None, trace });
            };
            let record = trace.span_at_start();
            let span = tracer
                .span_builder(record.name.clone())
                .with_kind(SpanKind::Internal)
                .with_start_time(time(record.start))
                .with_attributes(start_attributes(&record))
                .start_with_context(tracer, parent);
            let flight = InFlight { cx: Some(parent.with_span(span)), trace };
            self.propagate(&flight, forward);
            Some(flight)
        }

        /// `params._meta.traceparent` (and `tracestate`) of the request forwarded upstream name
        /// the call's `execute_tool` span, so the upstream's spans are its children.
        pub fn propagate(&self, flight: &InFlight, forward: &mut Value) {
            let Some(cx) = &flight.cx else { return };
            let mut carrier: HashMap<String, String> = HashMap::new();
            TraceContextPropagator::new().inject_context(cx, &mut carrier);
            if let Some(params) = forward.get_mut("params").and_then(Value::as_object_mut) {
                let meta = params.entry("_meta").or_insert_with(|| Value::Object(serde_json::Map::new()));
                if let Some(meta) = meta.as_object_mut() {
                    for (key, value) in carrier {
                        meta.insert(key, Value::String(value));
                    }
                }
            }
        }

        /// The protected call ended (its outcome recorded): its span gets the record's
        /// attributes, events and status and ends at the record's end; its measurements are
        /// recorded. A call not ended yet (suspended) is left alone.
        pub fn action_ended(&self, flight: InFlight) -> Option<InFlight> {
            if !flight.trace.is_ended() {
                return Some(flight);
            }
            let mut record = flight.trace.span();
            if let Some(meters) = &self.meters {
                meters.instruments.measure(std::mem::take(&mut record.measurements));
            }
            if let Some(cx) = flight.cx {
                complete(&cx.span(), record);
            }
            None
        }

        /// The kernel refused the call (its trace ended with the refusal): the whole
        /// `execute_tool` span at once, a child of the MCP span.
        pub fn action_refused(&self, call: &CallSpan, trace: Option<Arc<ActionTrace>>) {
            let Some(trace) = trace.filter(|t| t.is_ended()) else { return };
            let Some((tracer, _)) = &self.tracer else {
                if let Some(meters) = &self.meters {
                    meters.instruments.measure(trace.span().measurements);
                }
                return;
            };
            let Some(parent) = &call.cx else { return };
            let record = trace.span_at_start();
            let span = tracer
                .span_builder(record.name.clone())
                .with_kind(SpanKind::Internal)
                .with_start_time(time(record.start))
                .start_with_context(tracer, parent);
            let _ = self.action_ended(InFlight { cx: Some(parent.with_span(span)), trace });
        }

        /// `/metrics`: every instrument and gauge, collected now, in the Prometheus text
        /// format; `None` without `--admin`.
        pub fn prometheus_text(&self) -> Option<String> {
            let registry = self.registry.as_ref()?;
            let mut text = String::new();
            match prometheus::TextEncoder::new().encode_utf8(&registry.gather(), &mut text) {
                Ok(()) => Some(text),
                Err(error) => {
                    super::super::log::warn(&format!("writing /metrics failed: {error}"));
                    None
                }
            }
        }

        /// Export what is buffered and stop the exporters' threads (the gateway is stopping).
        pub fn shutdown(&self) {
            if let Some((_, provider)) = &self.tracer {
                if let Err(error) = provider.shutdown() {
                    super::super::log::warn(&format!("exporting the last spans failed: {error}"));
                }
            }
            if let Some(meters) = &self.meters {
                if let Err(error) = meters.provider.shutdown() {
                    super::super::log::warn(&format!("exporting the last metrics failed: {error}"));
                }
            }
        }
    }
}

#[cfg(not(feature = "otel"))]
mod off {
    use super::{ActionTrace, Arc, GaugeSource, Value};

    /// Built without the `otel` feature: no span, no instrument.
    pub struct Telemetry;
    pub struct CallSpan;
    pub struct InFlight;

    impl Telemetry {
        pub fn off() -> Telemetry {
            Telemetry
        }
        pub fn from_env(prometheus: bool) -> Result<Telemetry, String> {
            let wanted = super::exports(&|name| std::env::var(name).ok())?;
            if prometheus || wanted.traces || wanted.metrics {
                return Err("this warden was built without the `otel` feature: no OTLP export and no /metrics".into());
            }
            Ok(Telemetry)
        }
        pub fn summary(&self) -> String {
            "off (built without the otel feature)".into()
        }
        pub fn wants_trace(&self) -> Option<Arc<ActionTrace>> {
            None
        }
        pub fn register_gauges(&self, _source: GaugeSource) {}
        pub fn start_call(&self, _message: &Value, _tool: &str, _session: Option<&str>, _revision: &str) -> CallSpan {
            CallSpan
        }
        pub fn end_call(&self, _call: CallSpan, _body: Option<&Value>, _result: Option<&str>) {}
        pub fn action_started(
            &self,
            _call: &CallSpan,
            _trace: Option<Arc<ActionTrace>>,
            _forward: &mut Value,
        ) -> Option<InFlight> {
            None
        }
        pub fn propagate(&self, _flight: &InFlight, _forward: &mut Value) {}
        pub fn action_ended(&self, _flight: InFlight) -> Option<InFlight> {
            None
        }
        pub fn action_refused(&self, _call: &CallSpan, _trace: Option<Arc<ActionTrace>>) {}
        pub fn prometheus_text(&self) -> Option<String> {
            None
        }
        pub fn shutdown(&self) {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{call_attributes, call_error, exports, Exports};

    /// Variables set, and what they ask for (`Err` for a refusal).
    type Case<'a> = (&'a [(&'a str, &'a str)], Result<Exports, ()>);

    #[test]
    fn the_otel_variables_decide_what_is_exported() {
        let cases: &[Case<'_>] = &[
            (&[], Ok(Exports { traces: false, metrics: false })),
            (&[("OTEL_SERVICE_NAME", "x")], Ok(Exports { traces: false, metrics: false })),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")], Ok(Exports { traces: true, metrics: true })),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")], Ok(Exports { traces: false, metrics: false })),
            (
                &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://h/v1/traces")],
                Ok(Exports { traces: true, metrics: false }),
            ),
            (
                &[("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://h/v1/metrics")],
                Ok(Exports { traces: false, metrics: true }),
            ),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h"), ("OTEL_SDK_DISABLED", "true")],
                Ok(Exports { traces: false, metrics: false }),
            ),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h"), ("OTEL_SDK_DISABLED", "false")],
                Ok(Exports { traces: true, metrics: true }),
            ),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")], Err(())),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")],
                Ok(Exports { traces: true, metrics: true }),
            ),
            (&[("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")], Err(())),
        ];
        for (vars, expected) in cases {
            let got = exports(&|name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned()));
            assert_eq!(got.map_err(|_| ()), *expected, "{vars:?}");
        }
    }

    #[test]
    fn the_mcp_span_names_the_call_and_never_its_arguments() {
        let attributes = call_attributes("create_refund", &json!(7), Some("s-1"), "2025-06-18");
        assert_eq!(
            attributes,
            vec![
                ("mcp.method.name", "tools/call".to_owned()),
                ("gen_ai.tool.name", "create_refund".to_owned()),
                ("gen_ai.operation.name", "execute_tool".to_owned()),
                ("jsonrpc.request.id", "7".to_owned()),
                ("mcp.session.id", "s-1".to_owned()),
                ("mcp.protocol.version", "2025-06-18".to_owned()),
            ]
        );
        let long = "x".repeat(10_000);
        let capped = call_attributes(&long, &json!(long), Some(&long), "");
        assert!(capped.iter().all(|(_, value)| value.chars().count() <= super::MAX_TEXT_CHARS), "{capped:?}");
        assert_eq!(capped[1].1, "x".repeat(super::MAX_TEXT_CHARS));
        let bare = call_attributes("t", &json!(null), None, "");
        assert_eq!(bare.len(), 3, "{bare:?}");
        assert_eq!(call_attributes("t", &json!("a"), Some(""), "")[3], ("jsonrpc.request.id", "a".to_owned()));
    }

    #[test]
    fn how_a_call_ended_is_its_error_type() {
        let denied = json!({"error": {"code": -41001, "message": "card 4242", "data": {"error": "warden.denied"}}});
        assert_eq!(call_error(Some(&denied), None), Some(("-41001".into(), "warden.denied".into())));
        let plain = json!({"error": {"code": -32602, "message": "secret"}});
        assert_eq!(call_error(Some(&plain), None), Some(("-32602".into(), "JSON-RPC error -32602".into())));
        assert_eq!(call_error(None, Some("ambiguous")).map(|e| e.0), Some("ambiguous".into()));
        assert_eq!(call_error(None, Some("failed")).map(|e| e.0), Some("not_executed".into()));
        let tool_error = json!({"result": {"isError": true}});
        assert_eq!(call_error(Some(&tool_error), Some("committed")).map(|e| e.0), Some("tool_error".into()));
        assert_eq!(call_error(Some(&json!({"result": {}})), Some("committed")), None);
        assert_eq!(call_error(None, Some("committed")), None);
    }
}
