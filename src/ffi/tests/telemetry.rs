//! `warden_trace_*`, `warden_propose_traced` and the gauges across the boundary: the span record
//! a binding reads, the refusals of a missing or used trace, and the open option that lets spans
//! carry arguments.

use std::ptr;

use serde_json::{json, Value};

use super::super::permit::*;
use super::super::result::*;
use super::super::telemetry::*;
use super::{commit, free, open, open_with, refund, with_out, Failure, Handle, POLICY};

/// A trace from `warden_trace_new`, freed on drop.
struct Trace(*mut warden_trace);

impl Trace {
    fn new() -> Trace {
        let raw = warden_trace_new();
        assert!(!raw.is_null());
        Trace(raw)
    }

    fn span(&self) -> Value {
        // SAFETY: a live trace and writable out-parameters.
        with_out(|out, err| unsafe { warden_trace_span(self.0, out, err) }).expect("the span").json()
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        // SAFETY: a trace from `warden_trace_new`, freed once here.
        unsafe { warden_trace_free(self.0) }
    }
}

fn traced(handle: &Handle, request: &Value, trace: *const warden_trace) -> Result<*mut warden_permit, Failure> {
    let text = request.to_string();
    let mut permit = ptr::null_mut();
    let info = with_out(|info, err| {
        // SAFETY: a live handle, a live string, NULL options, writable out-parameters; `trace`
        // is NULL or live (each caller says which).
        unsafe {
            warden_propose_traced(handle.raw, text.as_ptr(), text.len(), ptr::null(), trace, &raw mut permit, info, err)
        }
    })?;
    assert!(info.json()["action_id"].is_string());
    Ok(permit)
}

#[test]
fn a_traced_call_reads_as_a_started_span_then_an_ended_one_after_the_permit_commits() {
    let handle = open(Some(POLICY));
    let trace = Trace::new();
    let permit = traced(&handle, &refund("pay_t1", 100), trace.0).expect("allowed");
    let started = trace.span();
    assert_eq!(started["name"], "execute_tool stripe.refund");
    assert_eq!(started["kind"], "internal");
    assert_eq!(started["end_time_unix_nano"], Value::Null);
    assert_eq!(started["attributes"]["gen_ai.operation.name"], "execute_tool");
    assert_eq!(started["metrics"], json!([]));
    commit(permit, "{}").expect("commit");
    free(permit);
    let ended = trace.span();
    assert_eq!(ended["start_time_unix_nano"], started["start_time_unix_nano"]);
    assert!(ended["end_time_unix_nano"].as_u64().is_some(), "{ended}");
    assert_eq!(ended["status"], json!({"code": "unset"}));
    assert_eq!(ended["attributes"]["warden.outcome"], "committed");
    assert_eq!(ended["attributes"]["warden.receipt.seq"], 1);
    assert_eq!(ended["metrics"][0]["name"], "warden.actions");
    assert_eq!(ended["events"][0]["name"], "gen_ai.guardrail.result");
}

#[test]
fn a_refused_traced_call_has_ended_when_it_returns() {
    let handle = open(Some(POLICY));
    let trace = Trace::new();
    let refused = traced(&handle, &refund("pay_t2", 900_000), trace.0).expect_err("denied");
    assert_eq!(refused.code, WARDEN_RESULT_DENIED);
    let span = trace.span();
    assert_eq!(span["attributes"]["error.type"], "denied");
    assert_eq!(span["status"]["code"], "error");
    assert_eq!(span["status"]["description"], refused.error["message"]);
}

#[test]
fn a_request_the_library_cannot_read_still_ends_the_span_as_a_fault() {
    let handle = open(Some(POLICY));
    let trace = Trace::new();
    let refused = traced(&handle, &json!({"name": "stripe.refund", "typo": 1}), trace.0).expect_err("unknown field");
    assert_eq!(refused.code, WARDEN_RESULT_INVALID_INPUT);
    let span = trace.span();
    assert_eq!(span["name"], "execute_tool", "the name was never read");
    assert_eq!(span["attributes"]["error.type"], "invalid_input");
    assert_eq!(span["attributes"]["warden.outcome"], "error");
    assert_eq!(span["start_time_unix_nano"], span["end_time_unix_nano"]);
}

#[test]
fn a_null_or_used_trace_is_refused_and_nothing_is_proposed() {
    let handle = open(Some(POLICY));
    let refused = traced(&handle, &refund("pay_t3", 100), ptr::null()).expect_err("NULL trace");
    assert_eq!(refused.code, WARDEN_RESULT_INVALID_INPUT);
    assert!(refused.error["message"].as_str().unwrap().contains("trace is NULL"));
    let trace = Trace::new();
    let permit = traced(&handle, &refund("pay_t4", 100), trace.0).expect("allowed");
    let refused = traced(&handle, &refund("pay_t5", 100), trace.0).expect_err("used trace");
    assert_eq!(refused.code, WARDEN_RESULT_INVALID_INPUT);
    assert_eq!(trace.span()["end_time_unix_nano"], Value::Null, "the first call's span is left as it was");
    assert_eq!(super::effect(&handle, "refund:pay_t5"), Value::Null);
    commit(permit, "1").expect("commit");
    free(permit);
    // SAFETY: NULL, and a NULL out: both refused without touching anything.
    let null = with_out(|out, err| unsafe { warden_trace_span(ptr::null(), out, err) }).expect_err("NULL");
    assert_eq!(null.code, WARDEN_RESULT_INVALID_INPUT);
    // SAFETY: freeing NULL is a no-op.
    unsafe { warden_trace_free(ptr::null_mut()) };
}

#[test]
fn the_telemetry_open_option_takes_two_flags_and_refuses_anything_else() {
    for bad in [r#"{"telemetry": {"arguments": "yes"}}"#, r#"{"telemetry": {"args": true}}"#, r#"{"telemetry": 1}"#] {
        let refused = open_with(Some(POLICY), bad).err().unwrap_or_else(|| panic!("{bad} opened"));
        assert_eq!(refused.code, WARDEN_RESULT_INVALID_INPUT, "{bad}");
        assert!(refused.error["message"].as_str().unwrap().contains("telemetry"), "{bad}: {}", refused.error);
    }
    let handle = open_with(Some(POLICY), r#"{"telemetry": {"arguments": true}}"#).expect("opens");
    let trace = Trace::new();
    let permit = traced(&handle, &refund("pay_t6", 4321), trace.0).expect("allowed");
    commit(permit, r#"{"kept": "out"}"#).expect("commit");
    free(permit);
    let attributes = &trace.span()["attributes"];
    assert_eq!(attributes["gen_ai.tool.call.arguments"], r#"{"amount":4321,"payment_id":"pay_t6"}"#);
    assert_eq!(attributes.get("gen_ai.tool.call.result"), None, "results were not opted in");
}

#[test]
fn gauges_are_described_without_a_handle_and_read_by_name() {
    // SAFETY: writable out-parameters.
    let described = with_out(|out, err| unsafe { warden_gauges_describe(out, err) }).expect("describe").json();
    let names: Vec<&str> = described.as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["warden.effects", "warden.approvals.pending", "warden.chain.length"]);
    let handle = open(Some(POLICY));
    let read = |name: &str| {
        // SAFETY: a live handle, a live string, writable out-parameters.
        with_out(|out, err| unsafe { warden_gauge_read(handle.raw, name.as_ptr(), name.len(), out, err) })
    };
    let permit = traced(&handle, &refund("pay_g", 100), Trace::new().0).expect("allowed");
    let effects = read("warden.effects").expect("read").json();
    assert_eq!(effects[1], json!({"value": 1, "attributes": {"warden.effect.state": "executing"}}));
    commit(permit, "1").expect("commit");
    free(permit);
    assert_eq!(read("warden.chain.length").expect("read").json(), json!([{"value": 1, "attributes": {}}]));
    let refused = read("warden.nope").expect_err("unknown");
    assert_eq!(refused.code, WARDEN_RESULT_INVALID_INPUT);
}
