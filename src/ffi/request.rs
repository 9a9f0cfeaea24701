//! The JSON documents callers pass in: a proposal, an action, open options. Unknown fields are
//! refused, so a typo cannot quietly change what is proposed or hashed.

use serde_json::{Map, Value};

use crate::action::{Action, Principal};
use crate::approval::Verified;
use crate::clock::Micros;
use crate::error::InvalidInputKind::{self, Malformed, Missing};
use crate::error::{Error, InvalidInput};

/// The fields of one JSON object, read with the caller's name for it in every message.
pub(super) struct Fields<'v> {
    map: &'v Map<String, Value>,
    what: &'static str,
}

fn invalid(kind: InvalidInputKind, path: String, message: String) -> Error {
    if path.is_empty() {
        Error::invalid(kind, message)
    } else {
        Error::invalid_at(kind, path, message)
    }
}

/// The path of `field` of the object `what` in error objects: under the object's name when
/// that is a field name (`request.principal`), the field alone under a description (`the
/// action`); `field` empty is the object itself (no path under a description).
fn field_path(what: &str, field: &str) -> String {
    match (what.contains(' '), field.is_empty()) {
        (true, _) => field.to_owned(),
        (false, true) => what.to_owned(),
        (false, false) => format!("{what}.{field}"),
    }
}

impl<'v> Fields<'v> {
    /// `value` must be an object holding only `allowed` fields.
    pub(super) fn new(value: &'v Value, what: &'static str, allowed: &[&str]) -> Result<Fields<'v>, Error> {
        let Value::Object(map) = value else {
            return Err(invalid(
                Malformed,
                field_path(what, ""),
                format!("{what} must be a JSON object with the fields {}", allowed.join(", ")),
            ));
        };
        if let Some(key) = map.keys().find(|key| !allowed.contains(&key.as_str())) {
            return Err(invalid(
                Malformed,
                field_path(what, key),
                format!("{what} has an unknown field {key:?}; the fields are {}", allowed.join(", ")),
            ));
        }
        Ok(Fields { map, what })
    }

    /// A field that is absent or `null` reads as `None`.
    pub(super) fn get(&self, field: &str) -> Option<&'v Value> {
        self.map.get(field).filter(|value| !value.is_null())
    }

    pub(super) fn string(&self, field: &str) -> Result<Option<&'v str>, Error> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(invalid(
                Malformed,
                self.path(field),
                format!("{}.{field} must be a string, null or absent", self.what),
            )),
        }
    }

    /// The caller's name for this object, for messages.
    /// The path of `field` in error objects (see [`field_path`]).
    pub(super) fn path(&self, field: &str) -> String {
        field_path(self.what, field)
    }

    pub(super) fn what(&self) -> &'static str {
        self.what
    }

    pub(super) fn required_string(&self, field: &str) -> Result<&'v str, Error> {
        self.string(field)?
            .ok_or_else(|| invalid(Missing, self.path(field), format!("{} needs {field:?}, a string", self.what)))
    }

    /// An integer count of milliseconds, as microseconds.
    pub(super) fn millis(&self, field: &str) -> Result<Option<Micros>, Error> {
        let Some(value) = self.get(field) else { return Ok(None) };
        value.as_i64().and_then(|ms| ms.checked_mul(1000)).map(Some).ok_or_else(|| {
            invalid(
                Malformed,
                self.path(field),
                format!("{}.{field} must be an integer number of milliseconds", self.what),
            )
        })
    }

    /// `true` or `false`; absent or `null` is `false`.
    pub(super) fn flag(&self, field: &str) -> Result<bool, Error> {
        match self.get(field) {
            None => Ok(false),
            Some(Value::Bool(flag)) => Ok(*flag),
            Some(_) => Err(invalid(
                Malformed,
                self.path(field),
                format!("{}.{field} must be true, false, null or absent", self.what),
            )),
        }
    }

    /// A non-negative integer.
    pub(super) fn unsigned(&self, field: &str) -> Result<Option<u64>, Error> {
        let Some(value) = self.get(field) else { return Ok(None) };
        value.as_u64().map(Some).ok_or_else(|| {
            invalid(Malformed, self.path(field), format!("{}.{field} must be a non-negative integer", self.what))
        })
    }

    /// `arguments`: a JSON object; absent is `{}`.
    pub(super) fn arguments(&self) -> Result<Value, Error> {
        match self.get("arguments") {
            None => Ok(Value::Object(Map::new())),
            Some(arguments @ Value::Object(_)) => Ok(arguments.clone()),
            Some(_) => Err(invalid(
                Malformed,
                self.path("arguments"),
                format!("{}.arguments must be a JSON object", self.what),
            )),
        }
    }

    /// `principal`: `{"agent", "user"}`; absent or `null` is `None`.
    pub(super) fn principal(&self) -> Result<Option<Principal>, Error> {
        self.principal_named("principal")
    }

    /// A principal `{"agent", "user"}` under `field`; absent or `null` is `None`.
    pub(super) fn principal_named(&self, field: &'static str) -> Result<Option<Principal>, Error> {
        let Some(value) = self.get(field) else { return Ok(None) };
        let fields = Fields::new(value, field, &["agent", "user"])?;
        let principal = Principal::new(fields.required_string("agent")?, fields.string("user")?)
            .map_err(|error| Error::InvalidInput(InvalidInput::from(error).rerooted(&self.path(field))))?;
        Ok(Some(principal))
    }

    pub(super) fn required_principal_named(&self, field: &'static str) -> Result<Principal, Error> {
        self.principal_named(field)?.ok_or_else(|| {
            let message = format!("{} needs {field:?}, an object {{\"agent\", \"user\"}}", self.what);
            invalid(Missing, self.path(field), message)
        })
    }

    pub(super) fn required_principal(&self) -> Result<Principal, Error> {
        self.principal()?.ok_or_else(|| {
            let message = format!("{} needs \"principal\", an object {{\"agent\", \"user\"}}", self.what);
            invalid(Missing, self.path("principal"), message)
        })
    }
}

/// The fields of an action document (`warden_action_hash`, `warden_store_reserve`).
pub(super) const ACTION_FIELDS: [&str; 5] = ["name", "arguments", "principal", "resource", "environment"];

/// An action from `{"name", "arguments", "principal", "resource", "environment"}`; an absent
/// environment is `default_environment`.
pub(super) fn action(value: &Value, default_environment: &str) -> Result<Action, Error> {
    let fields = Fields::new(value, "the action", &ACTION_FIELDS)?;
    let name = fields.required_string("name")?;
    if !matches!(value.get("arguments"), Some(Value::Object(_))) {
        return Err(invalid(Malformed, "arguments".into(), "the action needs \"arguments\", a JSON object".into()));
    }
    let principal = fields.required_principal()?;
    let resource = fields.string("resource")?;
    let environment = fields.string("environment")?.unwrap_or(default_environment);
    Ok(Action::new(name, fields.arguments()?, principal, resource, environment)?)
}

/// `identity` of a proposal request: `{"issuer": str|null, "claims": {...}}`.
pub(super) fn identity(fields: &Fields<'_>) -> Result<Option<Verified>, Error> {
    let Some(value) = fields.get("identity") else { return Ok(None) };
    let what = fields.what();
    let identity = Fields::new(value, "identity", &["issuer", "claims"])?;
    let claims = identity.get("claims").cloned().unwrap_or_else(|| Value::Object(Default::default()));
    Verified::new(identity.string("issuer")?, &claims).map(Some).map_err(|e| {
        Error::invalid_at(InvalidInputKind::Malformed, format!("{what}.identity"), format!("{what}.identity: {e}"))
    })
}
