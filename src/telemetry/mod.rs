//! OpenTelemetry for protected actions: one span record per protected call, built by the core
//! from what it decided, and the measurements and gauges a metrics SDK records. The core holds
//! no OpenTelemetry types and exports nothing itself: a host (a binding, through the C ABI's
//! `warden_trace_*`; a Rust program, through [`ActionTrace`]) turns the record into its own
//! SDK's span, so the span is a child of the host's current one and the host's own calls made
//! under the permit are its children. docs/TELEMETRY.md lists every name.
//!
//! - [`span`]: the record and the conventions it follows (pure).
//! - [`trace`]: [`ActionTrace`], the recorder the pipeline and the kernel write into.
//! - [`gauges`]: effects by state, pending approvals and the chain's length, read when observed.
//!
//! Nothing here runs unless a host hands a trace in with its request: without one the pipeline
//! records nothing and reads nothing more.

pub mod gauges;
pub mod span;
pub mod trace;

pub use span::{ActionSpan, AttributeValue, Attributes, Capture, Instrument, Measurement, SpanEvent, SpanStatus};
pub use trace::ActionTrace;
