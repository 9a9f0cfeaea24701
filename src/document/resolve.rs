//! Resolving: the YAML events' raw nodes into the typed tree (each scalar read by the
//! document's dialect, each mapping checked for duplicate keys), and a subtree back out as JSON.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::canonical::Floats;

use super::cx::Cx;
use super::error::DocumentError;
use super::events::{Raw, RawKind};
use super::quote::shorten;
use super::scalar::{warden_scalar, yaml11, Scalar};
use super::tree::{child_path, double_number, integer_number, Member, Node, NodeValue, YAML_STR_TAG};

const YAML_SEQ_TAG: &str = "tag:yaml.org,2002:seq";
const YAML_MAP_TAG: &str = "tag:yaml.org,2002:map";

impl Cx<'_> {
    pub(super) fn resolve(&self, raw: Raw, path: &str) -> Result<Node, DocumentError> {
        let line = raw.line;
        let value = match raw.kind {
            RawKind::Scalar { text, plain, tag } => {
                self.resolve_scalar(text, plain, tag).map_err(|message| self.error(path, Some(line), message))?
            }
            RawKind::Seq { items, tag } => {
                self.check_collection_tag(tag, YAML_SEQ_TAG, path, line)?;
                let mut nodes = Vec::with_capacity(items.len());
                for (index, item) in items.into_iter().enumerate() {
                    nodes.push(self.resolve(item, &format!("{path}[{index}]"))?);
                }
                NodeValue::Seq(nodes)
            }
            RawKind::Map { entries, tag } => {
                self.check_collection_tag(tag, YAML_MAP_TAG, path, line)?;
                let mut members: Vec<Member> = Vec::with_capacity(entries.len());
                let mut seen: HashMap<String, usize> = HashMap::new();
                for (key, value) in entries {
                    let key_line = key.line;
                    let name = self.resolve_key(key, path)?;
                    let member_path = child_path(path, &name);
                    if let Some(first) = seen.get(&name) {
                        return Err(self.error(
                            &member_path,
                            Some(key_line),
                            format!(
                                "duplicate key '{}' (first on line {first}); a key may appear once",
                                shorten(&name)
                            ),
                        ));
                    }
                    seen.insert(name.clone(), key_line);
                    let value = self.resolve(value, &member_path)?;
                    members.push(Member { key: name, line: key_line, value });
                }
                NodeValue::Map(members)
            }
        };
        Ok(Node { line, value })
    }

    fn check_collection_tag(
        &self,
        tag: Option<String>,
        allowed: &str,
        path: &str,
        line: usize,
    ) -> Result<(), DocumentError> {
        match tag {
            None => Ok(()),
            Some(tag) if tag == allowed => Ok(()),
            Some(tag) => Err(self.error(path, Some(line), unsupported_tag(&tag))),
        }
    }

    fn resolve_scalar(&self, text: String, plain: bool, tag: Option<String>) -> Result<NodeValue, String> {
        if let Some(tag) = tag {
            if tag == YAML_STR_TAG {
                return Ok(NodeValue::Str(text));
            }
            return Err(unsupported_tag(&tag));
        }
        if !plain {
            return Ok(NodeValue::Str(text));
        }
        if text.starts_with('?') {
            // In a flow collection PyYAML reads `?x` as an explicit key `x`, where YAML 1.2
            // reads the text `?x`: one document, two meanings.
            return Err(format!(
                "the unquoted value `{}` begins with '?', which YAML 1.1 reads as an explicit key \
                 inside [ ] and {{ }}; quote it",
                shorten(&text)
            ));
        }
        let scalar = if self.warden() { warden_scalar(&text)? } else { yaml11(&text)? };
        Ok(match scalar {
            Scalar::Null => NodeValue::Null,
            Scalar::Bool(b) => NodeValue::Bool(b),
            Scalar::Int(i) => NodeValue::Int(i),
            Scalar::Float(value) => NodeValue::Float(text, value),
            Scalar::Timestamp => NodeValue::Timestamp(text),
            Scalar::Str => NodeValue::Str(text),
        })
    }

    fn resolve_key(&self, key: Raw, parent: &str) -> Result<String, DocumentError> {
        let line = key.line;
        let node = self.resolve(key, parent)?;
        match node.value {
            NodeValue::Str(name) => Ok(name),
            _ => Err(self.error(
                parent,
                Some(line),
                format!("keys must be strings, and this one is {}; quote it if you mean the text", node.shown()),
            )),
        }
    }

    /// A subtree as JSON: what is hashed and what operands are compared with. Floats and
    /// timestamps have no canonical form and are refused with their path.
    pub(super) fn json(&self, node: &Node, path: &str) -> Result<Value, DocumentError> {
        self.json_with(node, path, Floats::Refused)
    }

    /// [`Cx::json`], with `floats` saying whether a float is refused or held as the canonical
    /// reading of its double (RFC 8785's text: `10.50` is `10.5`, `10.0` is the integer `10`);
    /// one with no finite double (`.inf`, `.nan`, `1e400`) is refused either way.
    pub(super) fn json_with(&self, node: &Node, path: &str, floats: Floats) -> Result<Value, DocumentError> {
        Ok(match &node.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Int(text) => Value::Number(integer_number(text)),
            NodeValue::Str(s) => Value::String(s.clone()),
            NodeValue::Float(_, value) if floats == Floats::Rfc8785 => match double_number(*value) {
                Some(number) => Value::Number(number),
                None => {
                    return Err(self.error(
                        path,
                        Some(node.line),
                        format!(
                            "{} is not a finite number, and only finite numbers have a canonical form",
                            node.shown()
                        ),
                    ))
                }
            },
            NodeValue::Float(..) => {
                return Err(self.error(
                    path,
                    Some(node.line),
                    format!(
                        "floats are not accepted, got {}; write an integer (minor units) or a string",
                        node.shown()
                    ),
                ))
            }
            NodeValue::Timestamp(_) => {
                return Err(self.error(
                    path,
                    Some(node.line),
                    format!("{} is not accepted here; quote it", node.shown()),
                ))
            }
            NodeValue::Seq(items) => {
                let mut values = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    values.push(self.json_with(item, &format!("{path}[{index}]"), floats)?);
                }
                Value::Array(values)
            }
            NodeValue::Map(members) => {
                let mut map = Map::new();
                for member in members {
                    map.insert(
                        member.key.clone(),
                        self.json_with(&member.value, &child_path(path, &member.key), floats)?,
                    );
                }
                Value::Object(map)
            }
        })
    }
}

fn unsupported_tag(tag: &str) -> String {
    format!("explicit YAML tags are not supported (found '{}'); only !!str is accepted", shorten(tag))
}
