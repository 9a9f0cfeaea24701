//! The gauges a host's metrics SDK observes on its own schedule: effects by state (AMBIGUOUS
//! first among them), approval requests waiting for a human, and the length of the receipt
//! chain, each read from the store when observed.

use crate::effect_state::EffectState;
use crate::error::{Error, InvalidInputKind, Result};
use crate::kernel::Kernel;

use super::span::{attributes_json, AttributeValue, Attributes};

/// One gauge: its name, unit and description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gauge {
    /// The instrument's name.
    pub name: &'static str,
    /// Its unit.
    pub unit: &'static str,
    /// Its description.
    pub description: &'static str,
}

/// Every gauge, in the order `describe` lists them.
pub const GAUGES: [Gauge; 3] = [
    Gauge {
        name: "warden.effects",
        unit: "{effect}",
        description: "Effects in each state that needs attention: ambiguous (a human must resolve it), executing, \
                      reserved, failed",
    },
    Gauge {
        name: "warden.approvals.pending",
        unit: "{request}",
        description: "Approval requests waiting for a human, unexpired",
    },
    Gauge {
        name: "warden.chain.length",
        unit: "{receipt}",
        description: "Receipts in the hash chain (the seq of the last one, pruned ones included)",
    },
];

/// The states `warden.effects` counts. COMMITTED is not among them: the store keeps no count
/// by state, so each state is counted by reading its records, and the committed ones are most
/// of the table (`warden.chain.length` grows with them).
pub const COUNTED_STATES: [EffectState; 4] =
    [EffectState::Ambiguous, EffectState::Executing, EffectState::Reserved, EffectState::Failed];

/// One observation of a gauge.
#[derive(Debug, Clone, PartialEq)]
pub struct GaugePoint {
    /// The value.
    pub value: i64,
    /// Its attributes (`warden.effect.state` for `warden.effects`).
    pub attributes: Attributes,
}

/// The gauges as JSON: `[{"name", "unit", "description"}]`.
pub fn describe() -> serde_json::Value {
    GAUGES
        .iter()
        .map(|gauge| serde_json::json!({"name": gauge.name, "unit": gauge.unit, "description": gauge.description}))
        .collect()
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Read the gauge `name` from `kernel`'s store now.
pub fn read(kernel: &Kernel, name: &str) -> Result<Vec<GaugePoint>> {
    match name {
        "warden.effects" => COUNTED_STATES
            .iter()
            .map(|state| {
                let records = kernel.effects(Some(*state), usize::MAX)?;
                Ok(GaugePoint {
                    value: count(records.len()),
                    attributes: vec![("warden.effect.state", AttributeValue::Str(state.as_str().to_owned()))],
                })
            })
            .collect(),
        "warden.approvals.pending" => {
            Ok(vec![GaugePoint { value: count(kernel.pending_approvals()?.len()), attributes: Vec::new() }])
        }
        "warden.chain.length" => Ok(vec![GaugePoint {
            value: i64::try_from(kernel.chain_size()?).unwrap_or(i64::MAX),
            attributes: Vec::new(),
        }]),
        other => Err(Error::invalid(
            InvalidInputKind::Unknown,
            format!(
                "there is no gauge {}; the gauges are {}",
                serde_json::Value::String(other.chars().take(64).collect()),
                GAUGES.iter().map(|g| g.name).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// `points` as JSON: `[{"value", "attributes": {...}}]`.
pub fn points_json(points: &[GaugePoint]) -> serde_json::Value {
    points
        .iter()
        .map(|point| serde_json::json!({"value": point.value, "attributes": attributes_json(&point.attributes)}))
        .collect()
}
