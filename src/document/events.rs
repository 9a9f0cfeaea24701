//! YAML events → a raw tree (scalars unresolved, lines kept, aliases expanded within bounds).

use std::collections::HashMap;

use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Scanner, TScalarStyle, TokenType};

use super::limits::{MAX_ALIAS_NODES, MAX_NESTING};

#[derive(Debug, Clone)]
pub(super) struct Raw {
    pub(super) line: usize,
    pub(super) kind: RawKind,
}

#[derive(Debug, Clone)]
pub(super) enum RawKind {
    Scalar { text: String, plain: bool, tag: Option<String> },
    Seq { items: Vec<Raw>, tag: Option<String> },
    Map { entries: Vec<(Raw, Raw)>, tag: Option<String> },
}

pub(super) struct Parsed {
    pub(super) root: Option<Raw>,
    /// The line of the first anchor, if the document has any.
    pub(super) first_anchor: Option<usize>,
}

enum Frame {
    Seq { line: usize, anchor: usize, tag: Option<String>, items: Vec<Raw> },
    Map { line: usize, anchor: usize, tag: Option<String>, entries: Vec<(Raw, Raw)>, key: Option<Raw> },
}

struct Anchored {
    node: Raw,
    size: usize,
    height: usize,
}

type SyntaxError = (Option<usize>, String);

fn tag_text(tag: Option<Tag>) -> Option<String> {
    tag.map(|tag| format!("{}{}", tag.handle, tag.suffix))
}

pub(super) fn parse_events(text: &str) -> Result<Parsed, SyntaxError> {
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Anchored> = HashMap::new();
    let mut root: Option<Raw> = None;
    let mut documents = 0usize;
    let mut materialised = 0usize;
    let mut first_anchor: Option<usize> = None;
    let too_deep = |line: usize| (Some(line), format!("containers nest deeper than {MAX_NESTING} levels"));
    loop {
        let (event, mark) =
            parser.next_token().map_err(|e| (Some(e.marker().line()), format!("not valid YAML: {}", e.info())))?;
        let line = mark.line();
        let completed: Option<(Raw, usize)> = match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => None,
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    return Err((
                        Some(line),
                        "a document holds one YAML document, and a second one starts here".into(),
                    ));
                }
                None
            }
            Event::Alias(id) => {
                first_anchor.get_or_insert(line);
                let Some(anchored) = anchors.get(&id) else {
                    return Err((
                        Some(line),
                        "an alias refers to the node that contains it (a recursive alias)".into(),
                    ));
                };
                if stack.len() + anchored.height > MAX_NESTING {
                    return Err(too_deep(line));
                }
                materialised = materialised.saturating_add(anchored.size);
                if materialised > MAX_ALIAS_NODES {
                    return Err((
                        Some(line),
                        format!(
                            "anchors and aliases expand to more than {MAX_ALIAS_NODES} nodes; refused as an \
                             alias bomb"
                        ),
                    ));
                }
                let mut node = anchored.node.clone();
                node.line = line;
                Some((node, 0))
            }
            Event::Scalar(text, style, anchor, tag) => {
                let plain = style == TScalarStyle::Plain;
                Some((Raw { line, kind: RawKind::Scalar { text, plain, tag: tag_text(tag) } }, anchor))
            }
            Event::SequenceStart(anchor, tag) => {
                if stack.len() >= MAX_NESTING {
                    return Err(too_deep(line));
                }
                stack.push(Frame::Seq { line, anchor, tag: tag_text(tag), items: Vec::new() });
                None
            }
            Event::MappingStart(anchor, tag) => {
                if stack.len() >= MAX_NESTING {
                    return Err(too_deep(line));
                }
                stack.push(Frame::Map { line, anchor, tag: tag_text(tag), entries: Vec::new(), key: None });
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq { line, anchor, tag, items }) => {
                    Some((Raw { line, kind: RawKind::Seq { items, tag } }, anchor))
                }
                _ => return Err((Some(line), "not valid YAML: a sequence ends that never started".into())),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map { line, anchor, tag, entries, key: None }) => {
                    Some((Raw { line, kind: RawKind::Map { entries, tag } }, anchor))
                }
                _ => return Err((Some(line), "not valid YAML: a mapping ends that never started".into())),
            },
        };
        let Some((node, anchor)) = completed else { continue };
        if anchor != 0 {
            first_anchor = Some(first_anchor.map_or(node.line, |first| first.min(node.line)));
            let (size, height) = measure(&node);
            materialised = materialised.saturating_add(size);
            if materialised > MAX_ALIAS_NODES {
                return Err((
                    Some(node.line),
                    format!("anchors and aliases expand to more than {MAX_ALIAS_NODES} nodes"),
                ));
            }
            anchors.insert(anchor, Anchored { node: node.clone(), size, height });
        }
        match stack.last_mut() {
            None => root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => match key.take() {
                None => *key = Some(node),
                Some(name) => entries.push((name, node)),
            },
        }
    }
    if !stack.is_empty() {
        return Err((None, "not valid YAML: the document ends inside a container".into()));
    }
    Ok(Parsed { root, first_anchor })
}

/// (nodes, container height) of a raw tree. Recursion is bounded by [`MAX_NESTING`].
fn measure(node: &Raw) -> (usize, usize) {
    match &node.kind {
        RawKind::Scalar { .. } => (1, 0),
        RawKind::Seq { items, .. } => {
            items.iter().map(measure).fold((1, 1), |(n, h), (cn, ch)| (n + cn, h.max(ch + 1)))
        }
        RawKind::Map { entries, .. } => entries.iter().fold((1, 1), |(n, h), (k, v)| {
            let (kn, kh) = measure(k);
            let (vn, vh) = measure(v);
            (n + kn + vn, h.max(kh + 1).max(vh + 1))
        }),
    }
}

/// PyYAML refuses an anchor name defined twice; the event parser silently rebinds it, so the
/// tokens are scanned once more (only for documents that have anchors at all).
pub(super) fn duplicate_anchor(text: &str) -> Option<(String, usize, usize)> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for token in Scanner::new(text.chars()) {
        if let TokenType::Anchor(name) = token.1 {
            let line = token.0.line();
            if let Some(first) = seen.get(&name) {
                return Some((name, *first, line));
            }
            seen.insert(name, line);
        }
    }
    None
}
