//! The bounds of the `sources:` section: how many, how long, and the defaults and ranges a
//! source may set.

/// Longest `base_url`, endpoint path or pointer accepted.
pub const MAX_PATH_LEN: usize = 2048;
/// Most sources, endpoints per source, params per endpoint, fields per endpoint.
pub const MAX_SOURCES: usize = 256;
/// Most endpoints per source.
pub const MAX_ENDPOINTS: usize = 256;
/// Most params per endpoint.
pub const MAX_PARAMS: usize = 64;
/// Most fields per endpoint.
pub const MAX_FIELDS: usize = 128;
/// Longest description.
pub const MAX_DESCRIPTION: usize = 2000;
/// Default and ceiling of a string param's `max_length` (Unicode scalar values).
pub const DEFAULT_MAX_LENGTH: u64 = 256;
/// The ceiling of a string param's `max_length`.
pub const MAX_STRING_PARAM: u64 = 2048;
/// Enum values: at most this many, each at most this long.
pub const MAX_ENUM_VALUES: usize = 256;
/// Longest enum value.
pub const MAX_ENUM_VALUE_LEN: usize = 256;

/// A source's `timeout_ms` unless it sets one.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// The `timeout_ms` a source may set, inclusive.
pub const TIMEOUT_MS_RANGE: (u64, u64) = (500, 60_000);
/// A source's `max_response_bytes` unless it sets one.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 1_048_576;
/// The `max_response_bytes` a source may set, inclusive.
pub const MAX_RESPONSE_BYTES_RANGE: (u64, u64) = (1024, 4_194_304);
