//! The answers the gateway rewrites on their way to the client: a `tools/list` keeps only the
//! tools the accepted tool set offers unchanged (a quarantined tool's new description never
//! reaches the model), and every list, and `initialize`'s `serverInfo`, loses its icons
//! (SEP-973) or keeps only vetted `data:` images, as the document says (and so do a tool
//! result's resource links). A list the gateway changed, or one without a scope it knows, says
//! `cacheScope: "private"`: it is this gateway's view, not the server's, and some SDKs read a
//! missing scope as `public`.
//!
//! Pure: the caller says which tools are offered.

use base64::Engine as _;
use serde_json::{json, Map, Value};
use warden::document::Icons;

/// Methods whose answers are read and may be rewritten, with the member holding their entries
/// (`None` for `initialize`, whose icons are `serverInfo`'s).
pub const REWRITTEN: [(&str, Option<&str>); 5] = [
    ("tools/list", Some("tools")),
    ("prompts/list", Some("prompts")),
    ("resources/list", Some("resources")),
    ("resources/templates/list", Some("resourceTemplates")),
    ("initialize", None),
];

/// Whether answers to `method` are read on their way back.
pub fn rewritten(method: &str) -> bool {
    REWRITTEN.iter().any(|(name, _)| *name == method)
}

/// The largest icon image kept, decoded.
pub const MAX_ICON_BYTES: usize = 64 * 1024;
/// The most icons kept on one entry.
pub const MAX_ICONS: usize = 8;

/// The image types kept under `icons: data_uris`, each with how its bytes begin. No SVG: it is
/// a document that may carry script, not an image.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Whether `bytes` are an image of `mime` by their signature.
fn is_image(mime: &str, bytes: &[u8]) -> bool {
    match mime {
        "image/png" => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "image/jpeg" => bytes.starts_with(b"\xff\xd8\xff"),
        "image/gif" => bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a"),
        "image/webp" => bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP",
        _ => false,
    }
}

/// One icon as kept under `icons: data_uris`, or `None`: `src` is exactly
/// `data:<type>;base64,<payload>` with a listed type, a strict base64 payload of at most
/// [`MAX_ICON_BYTES`] whose bytes are that image; `mimeType`, when present, names the same
/// type; `sizes` (`WxH` or `any`) and `theme` (`light`/`dark`) are kept when well-formed, and
/// nothing else is.
pub fn vetted_icon(icon: &Value) -> Option<Value> {
    let object = icon.as_object()?;
    let src = object.get("src")?.as_str()?;
    let (mime, payload) = src.strip_prefix("data:")?.split_once(";base64,")?;
    if !IMAGE_TYPES.contains(&mime) || payload.len() > MAX_ICON_BYTES.div_ceil(3) * 4 {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(payload).ok()?;
    if bytes.len() > MAX_ICON_BYTES || !is_image(mime, &bytes) {
        return None;
    }
    if let Some(declared) = object.get("mimeType") {
        if declared.as_str() != Some(mime) {
            return None;
        }
    }
    let mut kept = Map::new();
    kept.insert("src".into(), json!(src));
    kept.insert("mimeType".into(), json!(mime));
    let size = |s: &str| s == "any" || s.split_once('x').is_some_and(|(w, h)| digits(w) && digits(h));
    if let Some(sizes) = object.get("sizes").and_then(Value::as_array) {
        if sizes.iter().all(|s| s.as_str().is_some_and(size)) && sizes.len() <= 16 {
            kept.insert("sizes".into(), Value::Array(sizes.clone()));
        }
    }
    if let Some(theme) = object.get("theme").filter(|t| t.as_str() == Some("light") || t.as_str() == Some("dark")) {
        kept.insert("theme".into(), theme.clone());
    }
    Some(Value::Object(kept))
}

fn digits(text: &str) -> bool {
    (1..=5).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit())
}

/// The `icons` of one object as the document says; whether anything changed.
pub fn icons(object: &mut Map<String, Value>, policy: Icons) -> bool {
    let Some(found) = object.get("icons") else { return false };
    let kept: Vec<Value> = match policy {
        Icons::Strip => Vec::new(),
        Icons::DataUris => found
            .as_array()
            .map(|icons| icons.iter().filter_map(vetted_icon).take(MAX_ICONS).collect())
            .unwrap_or_default(),
    };
    if kept.is_empty() {
        object.remove("icons");
        return true;
    }
    let changed = Some(&kept) != found.as_array();
    object.insert("icons".into(), Value::Array(kept));
    changed
}

/// Rewrite the answer to `method` in place: for `tools/list`, drop each tool `offered` refuses;
/// for every method of [`REWRITTEN`], icons as `policy` says. A list that changed gets
/// `cacheScope: "private"`. Whether anything changed (the answer is then re-serialised).
pub fn rewrite(method: &str, envelope: &mut Value, policy: Icons, offered: &dyn Fn(&Value) -> bool) -> bool {
    let Some((_, member)) = REWRITTEN.iter().find(|(name, _)| *name == method) else { return false };
    let Some(result) = envelope.get_mut("result").and_then(Value::as_object_mut) else { return false };
    let mut changed = false;
    match member {
        None => {
            if let Some(info) = result.get_mut("serverInfo").and_then(Value::as_object_mut) {
                changed |= icons(info, policy);
            }
        }
        Some(member) => {
            if let Some(entries) = result.get_mut(*member).and_then(Value::as_array_mut) {
                if method == "tools/list" {
                    let before = entries.len();
                    entries.retain(|entry| offered(entry));
                    changed |= entries.len() != before;
                }
                for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                    changed |= icons(entry, policy);
                }
            }
            // A list the gateway changed is its own view; a list without a scope it knows is
            // private too, since some SDKs read a missing (or unknown) scope as `public`. An
            // interim `input_required` result carries no caching hints.
            let interim = result.get("resultType").and_then(Value::as_str) == Some("input_required");
            let scoped = matches!(result.get("cacheScope").and_then(Value::as_str), Some("public" | "private"));
            if !interim && (changed || !scoped) && result.get("cacheScope") != Some(&json!("private")) {
                result.insert("cacheScope".into(), json!("private"));
                changed = true;
            }
        }
    }
    changed
}

/// A tool result's `resource_link` contents (SEP-973 gives them `icons`, as a resource has)
/// with icons as `policy` says; whether anything changed. Every other part of the result is
/// left as it came.
pub fn result_icons(envelope: &mut Value, policy: Icons) -> bool {
    let Some(content) = envelope.get_mut("result").and_then(|r| r.get_mut("content")).and_then(Value::as_array_mut)
    else {
        return false;
    };
    let mut changed = false;
    for item in content.iter_mut().filter_map(Value::as_object_mut) {
        if item.get("type").and_then(Value::as_str) == Some("resource_link") {
            changed |= icons(item, policy);
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(mime: &str, bytes: &[u8]) -> String {
        format!("data:{mime};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn only_data_uris_of_real_images_are_kept_and_never_a_url_or_svg() {
        let png = data("image/png", PNG);
        let kept = vetted_icon(&json!({"src": png, "sizes": ["48x48", "any"], "theme": "dark", "onload": "x"}));
        assert_eq!(
            kept,
            Some(json!({"src": png, "mimeType": "image/png", "sizes": ["48x48", "any"], "theme": "dark"}))
        );
        for good in [
            data("image/jpeg", b"\xff\xd8\xff\xe0rest"),
            data("image/gif", b"GIF89a..."),
            data("image/webp", b"RIFF\x10\0\0\0WEBPVP8 "),
        ] {
            assert!(vetted_icon(&json!({"src": good})).is_some(), "{good}");
        }
        let svg = "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>";
        let big = [PNG, &vec![0u8; MAX_ICON_BYTES]].concat();
        let at_limit = [PNG, &vec![0u8; MAX_ICON_BYTES - PNG.len()]].concat();
        assert!(vetted_icon(&json!({"src": data("image/png", &at_limit)})).is_some(), "at the size limit");
        let refused = [
            json!({"src": "https://tracker.example/icon.png"}),
            json!({"src": "http://x.example/i.png", "mimeType": "image/png"}),
            json!({"src": data("image/svg+xml", svg.as_bytes())}),
            json!({"src": format!("data:image/svg+xml;utf8,{svg}")}),
            json!({"src": data("image/png", b"GIF89a not a png")}),
            json!({"src": data("image/png", svg.as_bytes())}),
            json!({"src": data("image/png", &big)}),
            json!({"src": data("image/png", PNG), "mimeType": "image/gif"}),
            json!({"src": data("IMAGE/PNG", PNG)}),
            json!({"src": format!("data:image/png;charset=x;base64,{}", &data("image/png", PNG)[22..])}),
            json!({"src": format!("{} ", data("image/png", PNG))}),
            json!({"src": "data:image/png;base64,%%%"}),
            json!({"src": 7}),
            json!("data:image/png;base64,AAAA"),
        ];
        for icon in refused {
            assert_eq!(vetted_icon(&icon), None, "{icon}");
        }
    }

    #[test]
    fn a_tools_list_keeps_only_offered_tools_and_vetted_icons_and_says_it_is_private() {
        let png = data("image/png", PNG);
        let answer = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
            {"name": "a", "icons": [{"src": "https://t.example/a.png"}, {"src": png}]},
            {"name": "b", "icons": [{"src": "https://t.example/b.png"}]},
            {"name": "quarantined"},
        ], "ttlMs": 60000, "cacheScope": "public"}});
        let offered = |entry: &Value| entry["name"] != "quarantined";
        let mut stripped = answer.clone();
        assert!(rewrite("tools/list", &mut stripped, Icons::Strip, &offered));
        assert_eq!(
            stripped["result"],
            json!({"tools": [{"name": "a"}, {"name": "b"}], "ttlMs": 60000, "cacheScope": "private"})
        );
        let mut vetted = answer.clone();
        assert!(rewrite("tools/list", &mut vetted, Icons::DataUris, &offered));
        assert_eq!(
            vetted["result"]["tools"],
            json!([{"name": "a", "icons": [{"src": png, "mimeType": "image/png"}]}, {"name": "b"}])
        );
        // Nothing to change: the answer is left as the server sent it, scope included.
        let mut plain =
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a"}], "cacheScope": "public"}});
        let before = plain.clone();
        assert!(!rewrite("tools/list", &mut plain, Icons::Strip, &|_| true));
        assert_eq!(plain, before);
        // The other lists and initialize lose their icons; only lists carry a cache scope.
        let mut prompts = json!({"result": {"prompts": [{"name": "p", "icons": [{"src": png}]}]}});
        assert!(rewrite("prompts/list", &mut prompts, Icons::Strip, &|_| false), "only tools are filtered");
        assert_eq!(prompts["result"], json!({"prompts": [{"name": "p"}], "cacheScope": "private"}));
        let mut init = json!({"result": {"serverInfo": {"name": "s", "icons": [{"src": "https://t.example/s.svg"}]}}});
        assert!(rewrite("initialize", &mut init, Icons::DataUris, &|_| true));
        assert_eq!(init["result"], json!({"serverInfo": {"name": "s"}}));
        let mut other = json!({"result": {"tools": [{"name": "x", "icons": []}]}});
        assert!(!rewrite("tools/call", &mut other, Icons::Strip, &|_| false));
    }

    #[test]
    fn a_list_without_a_scope_it_knows_is_private_and_an_interim_result_has_none() {
        let table = [
            (json!({"tools": []}), Some("private")),
            (json!({"tools": [], "cacheScope": "shared"}), Some("private")),
            (json!({"tools": [], "cacheScope": 1}), Some("private")),
            (json!({"tools": [], "cacheScope": "PUBLIC"}), Some("private")),
            (json!({"tools": [], "cacheScope": "public", "ttlMs": 5}), Some("public")),
            (json!({"tools": [], "cacheScope": "private"}), Some("private")),
            (json!({"resultType": "input_required", "inputRequests": {}}), None),
        ];
        for method in ["tools/list", "prompts/list", "resources/list", "resources/templates/list"] {
            for (result, scope) in &table {
                let mut envelope = json!({"jsonrpc": "2.0", "id": 1, "result": result});
                let changed = rewrite(method, &mut envelope, Icons::Strip, &|_| true);
                assert_eq!(envelope["result"].get("cacheScope").and_then(Value::as_str), *scope, "{method} {result}");
                assert_eq!(changed, envelope["result"] != *result, "{method} {result}: says whether it changed");
            }
        }
        let mut init = json!({"result": {"serverInfo": {"name": "s"}}});
        assert!(!rewrite("initialize", &mut init, Icons::Strip, &|_| true), "initialize is not a cacheable list");
        let mut error = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}});
        assert!(!rewrite("tools/list", &mut error, Icons::Strip, &|_| true), "an error has no result to scope");
    }

    #[test]
    fn a_tool_results_resource_links_lose_their_icons_and_nothing_else_changes() {
        let png = data("image/png", PNG);
        let answer = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [
                {"type": "text", "text": "see", "icons": [{"src": "https://t.example/x.png"}]},
                {"type": "resource_link", "uri": "file:///a", "name": "a",
                 "icons": [{"src": "https://t.example/a.png"}, {"src": png}]},
                {"type": "resource", "resource": {"uri": "file:///b", "text": "b"}},
            ],
            "structuredContent": {"icons": [{"src": "https://t.example/s.png"}]},
        }});
        let mut stripped = answer.clone();
        assert!(result_icons(&mut stripped, Icons::Strip));
        let mut expected = answer.clone();
        if let Some(link) = expected["result"]["content"][1].as_object_mut() {
            link.remove("icons");
        }
        assert_eq!(stripped, expected, "only the resource link's icons go; structuredContent is the tool's data");
        let mut vetted = answer.clone();
        assert!(result_icons(&mut vetted, Icons::DataUris));
        assert_eq!(vetted["result"]["content"][1]["icons"], json!([{"src": png, "mimeType": "image/png"}]));
        let mut plain = json!({"result": {"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}]}});
        assert!(!result_icons(&mut plain, Icons::Strip));
        for mut odd in [json!({"result": {"content": "x"}}), json!({"error": {}}), json!([1])] {
            assert!(!result_icons(&mut odd, Icons::Strip));
        }
    }
}
