//! The console's pages, each read from the kernel (the same calls `pending`, `inspect`,
//! `effects`, `receipts` and `delegations` make) and rendered as one HTML string.

use std::collections::BTreeMap;

use serde_json::Value;

use warden::approval::scope::{ScopeLimits, ScopedGrant};
use warden::approval::ApprovalRecord;
use warden::canonical::parse_json;
use warden::clock::{render, Micros};
use warden::receipt::StoredReceipt;
use warden::{EffectRecord, EffectState, Kernel};

use super::html::{csrf_field, esc, pre_json, url_part, value};
use crate::approval_view;
use crate::authority_commands::BudgetRow;
use crate::exit::Failure;
use warden::kernel::authority::ListedDelegation;

/// How many of the newest receipts the inbox searches for the last approved action of a name.
pub const DIFF_WINDOW: usize = 2_000;
/// How many pending requests one inbox page shows (the count says how many there are).
pub const INBOX_PAGE: usize = 100;
/// How many of the newest receipts the receipts page filters.
pub const RECEIPT_WINDOW: usize = 2_000;
/// How many receipts the receipts page lists.
pub const RECEIPT_ROWS: usize = 200;
/// How many effects of each state the effects page lists.
pub const EFFECT_ROWS: usize = 500;

/// How a changed argument is marked beside its last approved value.
pub const CHANGED: &str = "<span class=\"pill warn\">changed</span>";

/// The last approved execution of an action name: its receipt's arguments and who approved.
#[derive(Debug, Clone)]
pub struct Previous {
    pub receipt_id: String,
    pub approval_id: String,
    pub approver: String,
    pub finished_at: String,
    pub arguments: Value,
}

/// For each name, the newest receipt within [`DIFF_WINDOW`] that consumed an approval.
pub fn last_approved(kernel: &Kernel, names: &[&str]) -> Result<BTreeMap<String, Previous>, Failure> {
    let mut found = BTreeMap::new();
    if names.is_empty() {
        return Ok(found);
    }
    let rows = kernel.last_receipts(DIFF_WINDOW)?;
    for (_, receipt) in rows.iter().rev() {
        let Ok(doc) = parse_json(&receipt.document) else { continue };
        let Some(name) = doc.get("action").and_then(Value::as_str) else { continue };
        if !names.contains(&name) || found.contains_key(name) {
            continue;
        }
        let Some(approval_id) = doc.get("approval_id").and_then(Value::as_str) else { continue };
        let text = |key: &str| doc.get(key).and_then(Value::as_str).unwrap_or("-").to_owned();
        found.insert(
            name.to_owned(),
            Previous {
                receipt_id: text("receipt_id"),
                approval_id: approval_id.to_owned(),
                approver: text("approver"),
                finished_at: text("finished_at"),
                arguments: doc.get("arguments").cloned().unwrap_or(Value::Null),
            },
        );
        if found.len() == names.len() {
            break;
        }
    }
    Ok(found)
}

/// `4 min`, `2 h 5 min`, `expired`.
pub fn time_left(expires_at: Micros, now: Micros) -> String {
    let left = expires_at.saturating_sub(now);
    if left <= 0 {
        return "expired".to_owned();
    }
    let minutes = left / 60_000_000;
    let seconds = (left / 1_000_000) % 60;
    match minutes {
        0 => format!("{seconds} s"),
        m if m < 60 => format!("{m} min {seconds} s"),
        m if m < 60 * 24 => format!("{} h {} min", m / 60, m % 60),
        m => format!("{} d {} h", m / (60 * 24), (m / 60) % 24),
    }
}

/// What the inbox shows.
pub struct Inbox<'a> {
    pub pending: &'a [ApprovalRecord],
    pub previous: &'a BTreeMap<String, Previous>,
    pub now: Micros,
    pub csrf: &'a str,
    /// The policy hash of the document the console was given, to flag requests made under another.
    pub policy_hash: Option<&'a str>,
    /// The live scoped grants, each with uses left and a revoke form.
    pub grants: &'a [ScopedGrant],
    /// The document's caps on a scoped grant for each pending request whose rule allows one.
    pub limits: &'a BTreeMap<String, ScopeLimits>,
}

/// Where the document lets a scoped grant be made for each request: read from the policy the
/// store keeps under the request's policy hash (what the kernel checks the answer against).
pub fn scope_limits<'a>(
    kernel: &Kernel,
    records: impl IntoIterator<Item = &'a ApprovalRecord>,
) -> Result<BTreeMap<String, ScopeLimits>, Failure> {
    let mut out = BTreeMap::new();
    // Each kept policy is read and parsed once, however many requests were made under it.
    let mut policies: BTreeMap<String, Option<Value>> = BTreeMap::new();
    for record in records {
        let Some(stored) = record.action.as_ref() else { continue };
        let Some(hash) = stored.policy_hash.as_deref() else { continue };
        if !policies.contains_key(hash) {
            let parsed = kernel.policy(hash)?.and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
            policies.insert(hash.to_owned(), parsed);
        }
        let Some(Some(policy)) = policies.get(hash) else { continue };
        if let Some(limits) = warden::kernel::limits_in_policy(policy, &record.action_name, &stored.rule) {
            out.insert(record.approval_id.clone(), limits);
        }
    }
    Ok(out)
}

/// The requests the inbox shows: the [`INBOX_PAGE`] newest of `pending` (oldest first).
pub fn shown(pending: &[ApprovalRecord]) -> impl Iterator<Item = &ApprovalRecord> {
    pending.iter().rev().take(INBOX_PAGE)
}

/// The live scoped grants: what each covers, uses left, time left, and a revoke form.
fn grants_section(data: &Inbox<'_>) -> String {
    if data.grants.is_empty() {
        return String::new();
    }
    let csrf = csrf_field(data.csrf);
    let mut out = format!(
        "<section class=\"card\" id=\"scoped-grants\"><h2>Scoped grants <small class=\"muted\">{} live</small></h2>\
         <table><thead><tr><th>grant</th><th>action</th><th>requester</th><th>shape</th><th>uses left</th>\
         <th>expires</th><th>approver</th><th>revoke</th></tr></thead><tbody>",
        data.grants.len()
    );
    for grant in data.grants {
        let mut shape: Vec<String> =
            grant.scope.fixed.iter().map(|pointer| format!("{} fixed", esc(pointer))).collect();
        shape
            .extend(grant.scope.at_most.iter().map(|(pointer, bound)| format!("{} &le; {}", esc(pointer), esc(bound))));
        let id = esc(&grant.grant_id);
        out.push_str(&format!(
            "<tr id=\"{id}\"><td class=\"mono\">{id}</td><td>{}</td><td>{}</td><td>{}</td><td>{} of {}</td>\
             <td>{} ({} left)</td><td>{}</td><td><form method=\"post\" action=\"/grants/revoke\">{csrf}\
             <input type=\"hidden\" name=\"id\" value=\"{id}\"><label>Reason<input type=\"text\" name=\"reason\" \
             required maxlength=\"200\"></label><button class=\"deny\" type=\"submit\">Revoke</button></form></td></tr>",
            esc(&grant.action_name),
            esc(&warden::approval::person::label(&grant.requested_by)),
            if shape.is_empty() { "any arguments".to_owned() } else { shape.join(", ") },
            grant.uses_left,
            grant.scope.uses,
            esc(&render(grant.expires_at)),
            esc(&time_left(grant.expires_at, data.now)),
            esc(&grant.approver)
        ));
    }
    out.push_str("</tbody></table></section>");
    out
}

/// The inbox: pending requests newest first, each whole, with its diff and the answer forms.
pub fn inbox(data: &Inbox<'_>) -> String {
    let total = data.pending.len();
    let live = data.grants.len();
    let mut out = format!("<h1>Inbox <small class=\"muted\">{total} pending, {live} live scoped grants</small></h1>");
    out.push_str(&grants_section(data));
    if total == 0 {
        out.push_str("<p class=\"banner note\">No approval request is waiting.</p>");
        return out;
    }
    if total > INBOX_PAGE {
        out.push_str(&format!(
            "<p class=\"banner note\">The {INBOX_PAGE} newest of {total} pending requests are shown; answer these \
             to see the rest.</p>"
        ));
    }
    for record in shown(data.pending) {
        out.push_str(&request_card(record, data));
    }
    out
}

fn request_card(record: &ApprovalRecord, data: &Inbox<'_>) -> String {
    let id = esc(&record.approval_id);
    let mut out = format!(
        "<section class=\"card request\" id=\"{id}\"><h2>{} <small class=\"mono\">{id}</small></h2>",
        esc(&record.action_name)
    );
    let arguments = record.arguments();
    let previous = data.previous.get(&record.action_name);
    out.push_str(&arguments_table(arguments.as_ref(), previous));
    match previous {
        Some(previous) => out.push_str(&format!(
            "<p class=\"muted\">Compared with the last approved {} (receipt <a href=\"/receipt/{}\">{}</a>, approval \
             {}, approved by {}, finished {}); changed values are marked.</p>",
            esc(&record.action_name),
            url_part(&previous.receipt_id),
            esc(&previous.receipt_id),
            esc(&previous.approval_id),
            esc(&previous.approver),
            esc(&previous.finished_at)
        )),
        None => out.push_str(&format!(
            "<p class=\"muted\">No earlier approved {} among the last {DIFF_WINDOW} receipts to compare with.</p>",
            esc(&record.action_name)
        )),
    }
    let mut facts: Vec<(&str, String)> = Vec::new();
    let stored = record.action.as_ref();
    facts.push(("requested by", esc(&approval_view::requester(record))));
    facts.push((
        "resource",
        stored.and_then(|s| s.resource.as_deref()).map_or_else(|| "<span class=\"muted\">none</span>".into(), esc),
    ));
    facts.push(("environment", stored.map_or_else(|| "-".into(), |s| esc(&s.environment))));
    if let Some(stored) = stored {
        let when = stored.when.as_deref().map_or_else(String::new, |w| format!(" when {}", esc(w)));
        facts.push(("rule", format!("{}{when}", esc(&stored.rule))));
        let version = stored.policy_version.as_deref().map_or_else(String::new, |v| format!(" ({})", esc(v)));
        let hash = stored.policy_hash.as_deref().unwrap_or("-");
        let differs = match data.policy_hash {
            Some(current) if current != hash => {
                " <span class=\"pill warn\">not the document the console was given</span>".to_owned()
            }
            _ => String::new(),
        };
        facts.push(("policy", format!("<span class=\"mono\">{}</span>{version}{differs}", esc(hash))));
    }
    facts.push(("action hash", format!("<span class=\"mono\">{}</span>", esc(&record.action_hash))));
    facts.push(("approvals", esc(&approval_view::progress(record))));
    for vote in &record.votes {
        let who = warden::approval::person::label(&vote.approver);
        let how = match &vote.verified {
            Some(verified) => {
                format!("verified{}", verified.issuer.as_deref().map_or_else(String::new, |i| format!(" by {i}")))
            }
            None => "asserted".to_owned(),
        };
        let what = if vote.grant { "granted" } else { "denied" };
        facts.push(("vote", esc(&format!("{what} by {who} ({how}) at {}", render(vote.at)))));
    }
    if let Some(precondition) = &record.precondition {
        facts.push(("precondition", format!("<span class=\"mono\">{}</span>", esc(precondition))));
    }
    facts.push(("requested", esc(&render(record.requested_at))));
    facts.push((
        "expires",
        format!(
            "{} <strong>({} left)</strong>",
            esc(&render(record.expires_at)),
            esc(&time_left(record.expires_at, data.now))
        ),
    ));
    out.push_str("<dl class=\"facts\">");
    for (label, shown) in facts {
        out.push_str(&format!("<dt>{label}</dt><dd>{shown}</dd>"));
    }
    out.push_str("</dl>");
    if arguments.is_none() {
        out.push_str(
            "<p class=\"banner bad\">Its arguments were not recorded (requested before schema 4), so it cannot be \
             answered here.</p></section>",
        );
        return out;
    }
    let csrf = csrf_field(data.csrf);
    if let Some(limits) = data.limits.get(&record.approval_id) {
        out.push_str(&format!(
            "<details class=\"scoped\"><summary>Approve this and the next ones like it (a scoped grant: at most {} \
             uses, {} minutes)</summary><form method=\"post\" action=\"/approve\">{csrf}\
             <input type=\"hidden\" name=\"id\" value=\"{id}\"><input type=\"hidden\" name=\"hash\" value=\"{}\">\
             <label>Further uses<input type=\"number\" name=\"scope_uses\" min=\"1\" max=\"{}\" required></label>\
             <label>Minutes<input type=\"number\" name=\"scope_minutes\" min=\"1\" max=\"{}\" required></label>\
             <label>Arguments fixed to this request's values (JSON pointers, one per line: /customer_id)\
             <textarea name=\"scope_fixed\" rows=\"2\"></textarea></label>\
             <label>Numeric bounds (one per line: /amount=5000)<textarea name=\"scope_at_most\" rows=\"2\"></textarea></label>\
             <button class=\"approve\" type=\"submit\">Approve as a scoped grant</button></form></details>",
            limits.max_uses,
            limits.max_minutes,
            esc(&record.action_hash),
            limits.max_uses,
            limits.max_minutes
        ));
    }
    out.push_str(&format!(
        "<div class=\"actions\">\
         <form method=\"post\" action=\"/approve\">{csrf}<input type=\"hidden\" name=\"id\" value=\"{id}\">\
         <input type=\"hidden\" name=\"hash\" value=\"{}\"><button class=\"approve\" type=\"submit\">Approve this action</button></form>\
         <form method=\"post\" action=\"/deny\">{csrf}<input type=\"hidden\" name=\"id\" value=\"{id}\">\
         <label>Reason (required to deny)<input type=\"text\" name=\"reason\" required maxlength=\"200\"></label>\
         <button class=\"deny\" type=\"submit\">Deny</button></form></div></section>",
        esc(&record.action_hash)
    ));
    out
}

/// The arguments, one row per top-level key, with the last approved value beside each and the
/// changed rows marked.
fn arguments_table(arguments: Option<&Value>, previous: Option<&Previous>) -> String {
    let Some(arguments) = arguments else {
        return String::new();
    };
    let before = previous.map(|p| &p.arguments);
    let mut out = String::from("<table class=\"args\"><tr><th>argument</th><th>value</th>");
    if before.is_some() {
        out.push_str("<th>last approved</th>");
    }
    out.push_str("</tr>");
    let mut keys: Vec<&String> = Vec::new();
    if let Some(map) = arguments.as_object() {
        keys.extend(map.keys());
    }
    if let Some(map) = before.and_then(Value::as_object) {
        for key in map.keys() {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    if arguments.as_object().is_none() {
        // Not an object (the kernel only ever stores objects): the whole value in one row.
        out.push_str(&format!("<tr><td class=\"muted\">(whole)</td><td>{}</td></tr>", value(Some(arguments))));
    }
    for key in keys {
        let now = arguments.get(key);
        let changed = before.is_some_and(|before| before.get(key) != now);
        out.push_str(if changed { "<tr class=\"changed\">" } else { "<tr>" });
        out.push_str(&format!("<td class=\"mono\">{}</td><td class=\"new\">{}</td>", esc(key), value(now)));
        if let Some(before) = before {
            let old = before.get(key);
            let mark = if changed { format!("{} {CHANGED}", value(old)) } else { value(old) };
            out.push_str(&format!("<td>{mark}</td>"));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

/// What the effects page shows.
pub struct Effects<'a> {
    pub ambiguous: &'a [EffectRecord],
    pub others: &'a [EffectRecord],
    pub csrf: &'a str,
}

/// Effects by state, AMBIGUOUS first with the resolve form.
pub fn effects(data: &Effects<'_>) -> String {
    let mut out = format!("<h1>Effects <small class=\"muted\">{} ambiguous</small></h1>", data.ambiguous.len());
    out.push_str("<h2>Ambiguous — someone must say what happened</h2>");
    if data.ambiguous.is_empty() {
        out.push_str("<p class=\"banner ok\">No effect is AMBIGUOUS.</p>");
    }
    let csrf = csrf_field(data.csrf);
    for record in data.ambiguous {
        let key = esc(&record.effect_key);
        out.push_str(&format!(
            "<section class=\"card effect\" id=\"effect-{key}\"><h2><span class=\"mono\">{key}</span> \
             <span class=\"pill ambiguous\">ambiguous</span></h2><dl class=\"facts\">\
             <dt>action</dt><dd>{}</dd><dt>attempt</dt><dd>{}</dd><dt>updated</dt><dd>{}</dd><dt>error</dt><dd>{}</dd>\
             <dt>receipts</dt><dd><a href=\"/receipts?key={}\">the receipts of this key</a></dd></dl>\
             <form method=\"post\" action=\"/resolve\" class=\"actions\">{csrf}<input type=\"hidden\" name=\"key\" value=\"{key}\">\
             <input type=\"hidden\" name=\"attempt\" value=\"{attempt}\">\
             <label><span><input type=\"radio\" name=\"outcome\" value=\"committed\" required> it happened (committed)</span></label>\
             <label><span><input type=\"radio\" name=\"outcome\" value=\"failed\" required> it did not happen (failed; a retry may run it)</span></label>\
             <label>Reason (required)<input type=\"text\" name=\"reason\" required maxlength=\"150\"></label>\
             <button class=\"primary\" type=\"submit\">Resolve</button></form></section>",
            esc(&record.action_name),
            record.attempt,
            esc(&render(record.updated_at)),
            record.error.as_deref().map_or_else(|| "-".into(), esc),
            url_part(&record.effect_key),
            attempt = record.attempt,
        ));
    }
    out.push_str("<h2>Every other effect</h2>");
    if data.others.is_empty() {
        out.push_str("<p class=\"muted\">None.</p>");
        return out;
    }
    out.push_str("<table><tr><th>key</th><th>state</th><th>attempt</th><th>action</th><th>updated</th><th>resolved by</th><th></th></tr>");
    for record in data.others {
        let state = record.state.to_string();
        out.push_str(&format!(
            "<tr><td class=\"mono\">{}</td><td><span class=\"pill {state}\">{state}</span></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td><a href=\"/receipts?key={}\">receipts</a></td></tr>",
            esc(&record.effect_key),
            record.attempt,
            esc(&record.action_name),
            esc(&render(record.updated_at)),
            record.resolved_by.as_deref().map_or_else(|| "-".into(), esc),
            url_part(&record.effect_key),
        ));
    }
    out.push_str("</table>");
    out
}

/// The order the effects page lists states in after AMBIGUOUS.
pub fn state_rank(state: EffectState) -> u8 {
    match state {
        EffectState::Ambiguous => 0,
        EffectState::Executing => 1,
        EffectState::Reserved => 2,
        EffectState::Failed => 3,
        EffectState::Committed => 4,
    }
}

/// An RFC 3339 instant (`2026-12-07T08:00:00Z`, with or without fractions, any offset) in
/// microseconds since the epoch.
pub fn instant(text: &str) -> Result<Micros, String> {
    let at = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map_err(|e| format!("not an RFC 3339 time ({e})"))?;
    Micros::try_from(at.unix_timestamp_nanos() / 1_000).map_err(|_| "out of range".to_owned())
}

/// The receipts page's filters.
#[derive(Debug, Default)]
pub struct ReceiptFilter {
    pub action: Option<String>,
    pub agent: Option<String>,
    pub key: Option<String>,
    /// Finished at or after this instant (RFC 3339, as receipts print it).
    pub from: Option<String>,
    /// Finished at or before this instant.
    pub to: Option<String>,
}

impl ReceiptFilter {
    /// The time bounds as instants; an unreadable one is an error naming it (nothing is shown
    /// rather than everything).
    fn bounds(&self) -> Result<(Option<Micros>, Option<Micros>), String> {
        let parse = |name: &str, text: &Option<String>| match text.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            None => Ok(None),
            Some(text) => instant(text).map(Some).map_err(|e| format!("{name} {text:?}: {e}")),
        };
        Ok((parse("from", &self.from)?, parse("to", &self.to)?))
    }

    fn keeps(&self, doc: &Value, (from, to): (Option<Micros>, Option<Micros>)) -> bool {
        let field = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        let wanted = |want: &Option<String>, have: Option<String>| {
            want.as_deref().filter(|w| !w.is_empty()).is_none_or(|w| have.as_deref() == Some(w))
        };
        let finished = doc.get("finished_at").and_then(Value::as_str).and_then(|t| instant(t).ok());
        let in_time = match (from, to) {
            (None, None) => true,
            _ => finished.is_some_and(|at| from.is_none_or(|from| at >= from) && to.is_none_or(|to| at <= to)),
        };
        in_time
            && wanted(&self.action, field(doc.get("action")))
            && wanted(&self.agent, field(doc.pointer("/principal/agent")))
            && wanted(&self.key, field(doc.get("effect_key")))
    }
}

/// The chain's verification (the same `verify_chain` as `warden receipts --verify-chain`), then
/// the newest receipts that pass the filter.
pub fn receipts(
    report: &warden::receipt::ChainReport,
    rows: &[(u64, StoredReceipt)],
    filter: &ReceiptFilter,
) -> String {
    let mut out = String::from("<h1>Receipts</h1>");
    if report.ok {
        let pruned = match report.pruned_through {
            0 => String::new(),
            n => format!(" (receipts 1..={n} were pruned)"),
        };
        out.push_str(&format!(
            "<p class=\"banner ok\" id=\"chain\">Chain verified: {} receipts, every hash and link recomputed; head seq {}{pruned}.</p>",
            report.verified,
            report.head_seq.unwrap_or(0)
        ));
    } else {
        out.push_str("<div class=\"banner bad\" id=\"chain\"><strong>The receipt chain is broken</strong>: the store's evidence was altered or damaged.<ul>");
        for found in &report.breaks {
            let at = found.seq.map_or_else(String::new, |seq| format!(" at seq {seq}"));
            out.push_str(&format!("<li>{}{at}: {}</li>", esc(found.name), esc(&found.detail)));
        }
        if report.breaks_not_listed > 0 {
            out.push_str(&format!("<li>… and {} more</li>", report.breaks_not_listed));
        }
        out.push_str("</ul></div>");
    }
    let input = |name: &str, label: &str, current: &Option<String>| {
        format!(
            "<label>{label}<input type=\"text\" name=\"{name}\" value=\"{}\"></label>",
            esc(current.as_deref().unwrap_or(""))
        )
    };
    out.push_str(&format!(
        "<form method=\"get\" action=\"/receipts\" class=\"filters\">{}{}{}{}{}<button type=\"submit\">Filter</button> \
         <a href=\"/receipts\">clear</a></form>",
        input("action", "action", &filter.action),
        input("agent", "agent", &filter.agent),
        input("key", "effect key", &filter.key),
        input("from", "finished from (RFC 3339)", &filter.from),
        input("to", "finished to", &filter.to)
    ));
    let bounds = match filter.bounds() {
        Ok(bounds) => bounds,
        Err(why) => {
            out.push_str(&format!(
                "<p class=\"banner bad\">Not a time: {}; write e.g. 2026-12-07T08:00:00Z.</p>",
                esc(&why)
            ));
            return out;
        }
    };
    let mut shown_rows = Vec::new();
    for (seq, receipt) in rows.iter().rev() {
        let Ok(doc) = parse_json(&receipt.document) else {
            shown_rows.push(format!(
                "<tr><td>{seq}</td><td colspan=\"7\" class=\"muted\">unreadable receipt document</td></tr>"
            ));
            continue;
        };
        if !filter.keeps(&doc, bounds) {
            continue;
        }
        let text = |key: &str| esc(doc.get(key).and_then(Value::as_str).unwrap_or("-"));
        let result = text("result");
        let id = doc.get("receipt_id").and_then(Value::as_str).unwrap_or("");
        shown_rows.push(format!(
            "<tr><td>{seq}</td><td class=\"mono\"><a href=\"/receipt/{}\">{}</a></td><td>{}</td><td><span class=\"pill {result}\">{result}</span></td>\
             <td>{}</td><td>{}</td><td class=\"mono\">{}</td><td>{}</td></tr>",
            url_part(id),
            esc(id),
            text("finished_at"),
            text("action"),
            esc(doc.pointer("/principal/agent").and_then(Value::as_str).unwrap_or("-")),
            text("effect_key"),
            text("approver"),
        ));
        if shown_rows.len() == RECEIPT_ROWS {
            break;
        }
    }
    out.push_str(&format!(
        "<p class=\"muted\">{} receipt(s) shown, newest first, from the last {RECEIPT_WINDOW}.</p>",
        shown_rows.len()
    ));
    out.push_str("<table><tr><th>seq</th><th>receipt</th><th>finished</th><th>result</th><th>action</th><th>agent</th><th>effect key</th><th>approver</th></tr>");
    for row in shown_rows {
        out.push_str(&row);
    }
    out.push_str("</table>");
    out
}

/// One receipt's whole document, as stored and hashed.
pub fn receipt(seq: u64, receipt: &StoredReceipt) -> String {
    let value = receipt.to_json();
    let id = value.get("receipt_id").and_then(Value::as_str).unwrap_or("");
    format!(
        "<h1>Receipt <span class=\"mono\">{}</span> <small class=\"muted\">seq {seq}</small></h1>\
         <p class=\"muted\">The document as hashed into the chain, with its hash and the executor's result beside it.</p>{}\
         <p><a href=\"/receipts\">all receipts</a></p>",
        esc(id),
        pre_json(&value)
    )
}

/// Delegations (revoked ones included) and the document's grants and budgets.
pub fn authority(
    delegations: &[ListedDelegation],
    budgets: &[BudgetRow],
    grants: Option<&Value>,
    with_document: bool,
) -> String {
    let mut out = String::from("<h1>Authority</h1>");
    out.push_str(&format!("<h2>Budgets <small class=\"muted\">{}</small></h2>", budgets.len()));
    if !with_document {
        out.push_str(
            "<p class=\"muted\">Only the delegations' budgets: the console was given no document (--config).</p>",
        );
    }
    if budgets.is_empty() {
        out.push_str("<p class=\"muted\">No budget is set.</p>");
    } else {
        out.push_str(
            "<table><tr><th>grant</th><th>from</th><th>metric</th><th>window</th><th>spent</th><th>limit</th><th>left</th></tr>",
        );
        for row in budgets {
            let left = u128::from(row.limit).saturating_sub(row.spent);
            let pill = if left == 0 { "bad" } else { "ok" };
            out.push_str(&format!(
                "<tr><td class=\"mono\">{}</td><td>{}</td><td>{}</td><td>{} s</td><td>{}</td><td>{}</td>\
                 <td><span class=\"pill {pill}\">{left}</span></td></tr>",
                esc(&row.grant_id),
                row.from,
                esc(&row.metric),
                row.window_seconds,
                row.spent,
                row.limit,
            ));
        }
        out.push_str("</table>");
    }
    out.push_str("<h2>Grants in the document</h2>");
    match grants {
        Some(grants) => out.push_str(&pre_json(grants)),
        None => out.push_str(
            "<p class=\"muted\">The console was given no document (--config), or it has no authority section.</p>",
        ),
    }
    out.push_str(&format!("<h2>Delegations <small class=\"muted\">{}</small></h2>", delegations.len()));
    if delegations.is_empty() {
        out.push_str("<p class=\"muted\">No delegation is stored.</p>");
        return out;
    }
    out.push_str(&delegation_tree(delegations));
    out
}

/// The delegations as a tree under the grants they start from: each delegation under its parent,
/// one nested list per level. A delegation beneath a revoked one is marked so (the chain refuses
/// it). A parent that is no stored delegation is a root (a grant of the document).
fn delegation_tree(delegations: &[ListedDelegation]) -> String {
    /// Depth-first with an explicit stack: a node's line and list open, its children, the close.
    enum Step<'a> {
        Open(&'a ListedDelegation),
        Close,
    }
    let ids: std::collections::BTreeSet<&str> =
        delegations.iter().map(|d| d.stored.record.delegation_id.as_str()).collect();
    let revoked = crate::authority_commands::revoked_or_beneath(delegations);
    let mut children: BTreeMap<&str, Vec<&ListedDelegation>> = BTreeMap::new();
    for listed in delegations {
        children.entry(listed.stored.record.parent_id.as_str()).or_default().push(listed);
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut out = String::from("<ul class=\"tree\">");
    for root in children.keys().copied().filter(|parent| !ids.contains(parent)) {
        out.push_str(&format!("<li><span class=\"mono\">{}</span> <span class=\"muted\">grant</span><ul>", esc(root)));
        let mut stack: Vec<Step<'_>> = vec![Step::Close];
        stack.extend(children.get(root).into_iter().flatten().rev().map(|child| Step::Open(child)));
        while let Some(step) = stack.pop() {
            let Step::Open(listed) = step else {
                out.push_str("</ul></li>");
                continue;
            };
            let id = listed.stored.record.delegation_id.as_str();
            if !seen.insert(id) {
                continue;
            }
            let beneath_revoked = revoked.contains(id) && listed.stored.revocation.is_none();
            out.push_str(&format!("<li>{}<ul>", delegation_line(listed, beneath_revoked)));
            stack.push(Step::Close);
            stack.extend(children.get(id).into_iter().flatten().rev().map(|child| Step::Open(child)));
        }
    }
    out.push_str("</ul>");
    out
}

fn delegation_line(listed: &ListedDelegation, beneath_revoked: bool) -> String {
    let value = listed.to_json();
    let record = &listed.stored.record;
    let actions = value["grant"]["actions"]
        .as_array()
        .map_or_else(String::new, |list| list.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "));
    let state = match &listed.stored.revocation {
        Some(revocation) => format!(
            "<span class=\"pill bad\">revoked</span> {} by {}",
            esc(&render(revocation.revoked_at)),
            esc(revocation.revoked_by.as_deref().unwrap_or("?"))
        ),
        None if listed.grant.is_err() => "<span class=\"pill bad\">unreadable</span>".to_owned(),
        None if beneath_revoked => "<span class=\"pill bad\">beneath a revoked delegation</span>".to_owned(),
        None => "<span class=\"pill ok\">live</span>".to_owned(),
    };
    format!(
        "<span class=\"mono\">{}</span> to <b>{}</b> [{}] by {} (depth {}) {state}",
        esc(&record.delegation_id),
        esc(value["grant"]["subject"]["agent"].as_str().unwrap_or("?")),
        esc(&actions),
        esc(&warden::approval::person::label(&record.created_by)),
        record.depth,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_read_as_receipts_print_them_and_as_people_type_them() {
        let printed = "2026-12-07T08:39:49.997Z";
        assert_eq!(instant(printed), warden::clock::parse(printed));
        assert_eq!(instant("2026-12-07T09:39:49.997+01:00"), warden::clock::parse(printed));
        assert_eq!(instant("1970-01-01T00:00:01Z"), Ok(1_000_000));
        for bad in ["", "yesterday", "2026-12-07", "2026-12-07T08:00:00"] {
            assert!(instant(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn time_left_reads_in_the_largest_units() {
        let m = 60_000_000;
        assert_eq!(time_left(0, 1), "expired");
        assert_eq!(time_left(5_000_000, 0), "5 s");
        assert_eq!(time_left(4 * m + 3_000_000, 0), "4 min 3 s");
        assert_eq!(time_left(125 * m, 0), "2 h 5 min");
        assert_eq!(time_left(26 * 60 * m, 0), "1 d 2 h");
    }

    #[test]
    fn changed_arguments_are_marked_and_every_value_is_escaped() {
        let previous = Previous {
            receipt_id: "rct_1".into(),
            approval_id: "apr_1".into(),
            approver: "console:bob".into(),
            finished_at: "t".into(),
            arguments: serde_json::json!({"amount": 4000, "payment_id": "p1", "gone": true}),
        };
        let now = serde_json::json!({"amount": 400000, "payment_id": "p1", "note": "<script>alert(1)</script>"});
        let table = arguments_table(Some(&now), Some(&previous));
        assert!(table.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{table}");
        assert!(!table.contains("<script>"), "{table}");
        assert_eq!(
            table.matches("<tr class=\"changed\">").count(),
            3,
            "amount, note (new) and gone (removed): {table}"
        );
        assert!(table.contains(&format!("<code>4000</code> {CHANGED}")), "{table}");
    }
}
