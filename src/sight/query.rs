//! One query, end to end: the agent's arguments are confined to a configured window, the
//! credential is resolved for this request only, the one GET runs under every bound, and the
//! response is selected, redacted and pruned. Nothing of the raw body, the URL's query or the
//! credential leaves this function except through `shape`.

use serde_json::Value;

use super::config::Sources;
use super::confine::{confine, Confined, Query};
use super::credentials::{credential_for, CredentialProvider};
use super::shape::{self, Echo, SightResult};
use crate::clock::{render, Micros};
use crate::error::SightError;
use crate::http::{fetch, CancelToken, FetchRequest};

/// Run one agent query (`{"source", "endpoint", "params", "fields"}`) against the configured
/// sources. `now` stamps `fetchedAt`. Every error message is redacted with the credential
/// actually sent on this request (the header value and each value it was built from).
pub fn run(
    sources: &Sources,
    query: &Value,
    provider: &dyn CredentialProvider,
    cancel: &CancelToken,
    now: Micros,
) -> Result<SightResult, SightError> {
    let query = Query::from_json(query)?;
    let confined = confine(sources, &query)?;
    fetch_confined(&confined, provider, cancel, now)
}

/// The GET of an already confined query, shaped. Snapshots are the caller's (they need the
/// store); see `sight::api`.
pub fn fetch_confined(
    confined: &Confined<'_>,
    provider: &dyn CredentialProvider,
    cancel: &CancelToken,
    now: Micros,
) -> Result<SightResult, SightError> {
    let source = confined.source;
    // A query cancelled while the host's provider was still answering is `aborted`, not
    // `credential_unavailable`.
    let cancelled =
        || if cancel.is_cancelled() { Some(SightError::new("aborted", "the query was cancelled")) } else { None };
    if let Some(aborted) = cancelled() {
        return Err(aborted);
    }
    let sent = credential_for(&source.auth.spec(), provider).map_err(|e| cancelled().unwrap_or(e))?;
    let echo = match &sent {
        Some(sent) => {
            let parts: Vec<&str> = sent.parts.iter().map(|part| part.as_str()).collect();
            Echo::for_sent(Some(&sent.value), &parts)
        }
        None => Echo::none(),
    };
    let request = FetchRequest {
        url: confined.url.clone(),
        header: sent.map(|sent| (sent.name, sent.value)),
        timeout_ms: source.timeout_ms,
        max_response_bytes: source.max_response_bytes,
        ca_certs: source.ca_certs.clone(),
    };
    let redacted =
        |error: SightError| SightError { code: error.code, message: shape::error_text(&error.message, &echo) };
    let response = fetch(&request, cancel).map_err(redacted)?;
    let document = shape::parse_body(&response.body).map_err(redacted)?;
    let limits = shape::Limits {
        max_depth: usize::try_from(source.limits.max_depth).unwrap_or(usize::MAX),
        max_items: usize::try_from(source.limits.max_items).unwrap_or(usize::MAX),
        max_string: usize::try_from(source.limits.max_string).unwrap_or(usize::MAX),
    };
    let shaped = shape::shape(&document, &confined.aliases, &limits, &echo);
    Ok(shaped.into_result(&source.id, &confined.endpoint.id, &render(now), response.status, None))
}
