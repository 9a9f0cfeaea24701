//! A source's `base_url` and an endpoint's `path`: checked as raw text before the WHATWG parser
//! sees them (it silently repairs tabs, `\`, `%2e` segments and numeric hosts), then resolved
//! and checked to stay under the base.

use std::net::{Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

use super::bounds::MAX_PATH_LEN;

pub(super) struct Base {
    pub(super) url: Url,
    pub(super) origin: String,
    pub(super) base_path: String,
}

/// Check the raw text, parse, and require that parsing changed nothing that matters.
pub(super) fn parse_base_url(raw: &str, allow_insecure_http: bool) -> Result<Base, String> {
    if raw.is_empty() {
        return Err("must not be empty".to_owned());
    }
    if raw.len() > MAX_PATH_LEN {
        return Err(format!("at most {MAX_PATH_LEN} characters"));
    }
    if raw.trim() != raw {
        return Err("must not have whitespace around it (the URL parser would silently trim it)".to_owned());
    }
    if raw.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("must not contain whitespace or control characters".to_owned());
    }
    if raw.contains('\\') {
        return Err("must not contain '\\' (the URL parser reads it as '/')".to_owned());
    }
    if !raw.is_ascii() {
        return Err("must be ASCII; write an international host name in punycode (xn--…)".to_owned());
    }
    let Some((scheme, rest)) = raw.split_once("://") else {
        return Err("must be an absolute https URL (https://host[/path])".to_owned());
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        return Err("the scheme must be https (or http for loopback or with allow_insecure_http)".to_owned());
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    if authority.contains('@') {
        return Err(
            "must not carry userinfo (anything before '@' in the authority); configure credentials through auth with a reference".to_owned()
        );
    }
    if tail.contains('?') || tail.contains('#') {
        return Err("must not carry a query or a fragment; endpoint params go into the query".to_owned());
    }
    let url = Url::parse(raw).map_err(|e| format!("is not a valid URL ({e})"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry userinfo".to_owned());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("must not carry a query or a fragment".to_owned());
    }
    let raw_host = raw_host(authority).ok_or("has a malformed host or port")?;
    let loopback = match url.host() {
        None => return Err("must name a host".to_owned()),
        Some(Host::Domain(domain)) => {
            if raw_host.to_ascii_lowercase() != domain {
                return Err("the host is not written canonically (the URL parser rewrote it)".to_owned());
            }
            if domain.bytes().all(|b| b.is_ascii_digit() || b == b'.' || b == b'x' || b == b'X') {
                return Err("non-canonical numeric host; write IPv4 addresses as four decimal octets".to_owned());
            }
            domain == "localhost"
        }
        Some(Host::Ipv4(addr)) => {
            if raw_host != addr.to_string() {
                return Err(
                    "non-canonical numeric host; write IPv4 addresses as four decimal octets (127.0.0.1)".to_owned()
                );
            }
            is_loopback_v4(addr)
        }
        Some(Host::Ipv6(addr)) => {
            if raw_host.to_ascii_lowercase() != format!("[{addr}]") {
                return Err(format!("non-canonical IPv6 host; write it as [{addr}]"));
            }
            is_loopback_v6(addr)
        }
    };
    if url.port() == Some(0) {
        return Err("port 0 is not a port".to_owned());
    }
    match url.scheme() {
        "https" => {}
        "http" if loopback || allow_insecure_http => {}
        "http" => {
            return Err("http is allowed only for loopback hosts (localhost, 127.0.0.0/8, ::1) or with \
                        allow_insecure_http: true; use https"
                .to_owned())
        }
        _ => return Err("the scheme must be https".to_owned()),
    }
    let raw_path = tail;
    let parsed_path = url.path();
    if !(raw_path.is_empty() && parsed_path == "/") && raw_path != parsed_path {
        return Err("the path is not written canonically (the URL parser rewrote it)".to_owned());
    }
    let base_path = parsed_path.trim_end_matches('/').to_owned();
    if !base_path.is_empty() {
        check_path_text(&base_path).map_err(|m| format!("its path {m}"))?;
    }
    let origin = url.origin().ascii_serialization();
    Ok(Base { url, origin, base_path })
}

/// The host as written in the authority (userinfo already refused), without the port.
fn raw_host(authority: &str) -> Option<&str> {
    if authority.starts_with('[') {
        let end = authority.find(']')?;
        let (host, rest) = authority.split_at(end + 1);
        if !(rest.is_empty()
            || rest.strip_prefix(':').is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
        {
            return None;
        }
        return Some(host);
    }
    match authority.split_once(':') {
        None => Some(authority),
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => Some(host),
        Some(_) => None,
    }
}

fn is_loopback_v4(addr: Ipv4Addr) -> bool {
    addr.octets()[0] == 127
}

fn is_loopback_v6(addr: Ipv6Addr) -> bool {
    addr == Ipv6Addr::LOCALHOST || addr.to_ipv4_mapped().is_some_and(is_loopback_v4)
}

// ---------------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------------

/// RFC 3986 unreserved characters, `/`, `%` for escapes, and the sub-delimiters a path may
/// carry. `:` and `@` are not allowed (written or percent-encoded): they delimit the authority
/// (`/@evil.com`, `/:8080`), and a path has no business looking like one.
fn path_char_allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~/%!$'()*+,=".contains(&b)
}

/// The load-time path rules (DESIGN §6), on the text as written and again percent-decoded.
pub fn check_path_text(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err("must start with '/'".to_owned());
    }
    if path.len() > MAX_PATH_LEN {
        return Err(format!("must be at most {MAX_PATH_LEN} characters"));
    }
    if path.chars().any(char::is_control) {
        return Err("must not contain control characters".to_owned());
    }
    if path.contains('\\') {
        return Err("must not contain '\\'".to_owned());
    }
    if path.contains('?') || path.contains('#') {
        return Err("must not contain '?' or '#'; params go into the query string".to_owned());
    }
    if path.contains("://") {
        return Err("must not contain '://'".to_owned());
    }
    if path.contains("//") {
        return Err("must not contain '//'".to_owned());
    }
    if path.contains('{') || path.contains('}') {
        return Err("must not contain '{' or '}': path placeholders are not supported; params go into the query \
                    string"
            .to_owned());
    }
    if let Some(c) = path.chars().find(|&c| !c.is_ascii() || !path_char_allowed(c as u8)) {
        let shown = if c.is_ascii_graphic() || c == ' ' { format!("'{c}'") } else { format!("U+{:04X}", u32::from(c)) };
        return Err(format!(
            "contains {shown}, which is outside the allowed characters (A-Z a-z 0-9 - . _ ~ / % ! $ ' ( ) * + , =)"
        ));
    }
    if path.split('/').any(|s| s == "." || s == "..") {
        return Err("must not contain '.' or '..' segments".to_owned());
    }
    // Percent escapes: well-formed, and decoding must not produce anything the rules refuse.
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let Some(value) =
                hex.filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit())).and_then(|h| u8::from_str_radix(h, 16).ok())
            else {
                return Err("contains a malformed percent escape".to_owned());
            };
            if matches!(value, b'/' | b'\\' | b'%' | b'.' | b'?' | b'#' | b':' | b'@' | b'[' | b']')
                || value < 0x20
                || value == 0x7f
            {
                return Err(format!(
                    "contains an encoded %{value:02X}, which is refused (encoded delimiters, dots, controls and \
                     double encoding)"
                ));
            }
            decoded.push(value);
            i += 3;
        } else {
            decoded.push(b);
            i += 1;
        }
    }
    let Ok(decoded) = String::from_utf8(decoded) else {
        return Err("percent-decodes to bytes that are not UTF-8".to_owned());
    };
    if decoded.chars().any(char::is_control) {
        return Err("percent-decodes to control characters".to_owned());
    }
    if decoded.contains("//") || decoded.contains('\\') || decoded.split('/').any(|s| s == "." || s == "..") {
        return Err("percent-decodes to '//', '\\' or a dot segment".to_owned());
    }
    Ok(())
}

/// Resolve `base_path + path` against the origin and require nothing moved.
pub(super) fn check_resolved(base: &Base, path: &str) -> Result<(), String> {
    let expected = format!("{}{path}", base.base_path);
    let url = Url::parse(&format!("{}{expected}", base.origin)).map_err(|e| format!("does not resolve ({e})"))?;
    if url.origin().ascii_serialization() != base.origin {
        return Err("resolves to another origin".to_owned());
    }
    if url.path() != expected || url.query().is_some() || url.fragment().is_some() {
        return Err("is rewritten by the URL parser; write it canonically".to_owned());
    }
    if !url.path().starts_with(&base.base_path) {
        return Err("leaves the base path".to_owned());
    }
    Ok(())
}
