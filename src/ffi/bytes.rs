//! Bytes across the boundary: borrowed `(ptr, len)` views in, owned `warden_buf` out, and
//! out-parameters that are checked for NULL up front and written only on success.

use serde_json::Value;

use crate::canonical::parse_json;
use crate::error::{Error, InvalidInput, InvalidInputKind};

use super::result::error_json;
use super::unwind::infallible;

/// An owned byte buffer returned by the library: UTF-8 JSON (or text) of `len` bytes at `ptr`.
/// One NUL byte follows the data (not counted in `len`), so it may also be read as a C string.
/// Free it with `warden_buf_free`, exactly once. `{NULL, 0}` is the empty buffer.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct warden_buf {
    /// The first byte, or NULL for the empty buffer.
    pub ptr: *mut u8,
    /// How many bytes of data (the trailing NUL not counted).
    pub len: usize,
}

impl warden_buf {
    fn from_vec(mut bytes: Vec<u8>) -> warden_buf {
        let len = bytes.len();
        bytes.push(0);
        let ptr = Box::into_raw(bytes.into_boxed_slice()).cast::<u8>();
        warden_buf { ptr, len }
    }

    pub(super) fn from_text(text: &str) -> warden_buf {
        warden_buf::from_vec(text.as_bytes().to_vec())
    }

    pub(super) fn from_json(value: &Value) -> warden_buf {
        // Serializing a `Value` cannot fail: every map key is a string.
        warden_buf::from_vec(serde_json::to_vec(value).unwrap_or_else(|_| b"null".to_vec()))
    }
}

/// Frees a buffer returned by this library. Freeing `{NULL, 0}` is a no-op.
///
/// Ownership: takes the buffer back; `buf.ptr` is invalid afterwards. Pass the buffer exactly as
/// it was returned (same `ptr` and `len`), once.
///
/// Thread safety: safe from any thread; a buffer may be freed on a thread other than the one
/// that received it.
///
/// # Safety
/// `buf` is `{NULL, 0}` or a buffer returned by this library and not yet freed.
#[no_mangle]
pub unsafe extern "C" fn warden_buf_free(buf: warden_buf) {
    infallible((), || {
        let Some(allocated) = buf.len.checked_add(1) else { return };
        if buf.ptr.is_null() {
            return;
        }
        // SAFETY: `ptr` came from `Box<[u8]>::into_raw` in `warden_buf::from_vec` with `len + 1`
        // bytes (the data and its NUL), and the caller hands it back exactly once.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(buf.ptr, allocated)) });
    });
}

fn null(what: &str) -> Error {
    Error::invalid_at(InvalidInputKind::Missing, what, format!("{what} is NULL, and it is required"))
}

/// Borrow `len` bytes at `ptr`; `None` for `(NULL, 0)`, the absent value.
///
/// # Safety
/// `ptr` is NULL or points at `len` readable bytes that stay valid and unchanged for `'a`.
pub(super) unsafe fn borrow<'a>(ptr: *const u8, len: usize, what: &str) -> Result<Option<&'a [u8]>, Error> {
    if ptr.is_null() {
        return match len {
            0 => Ok(None),
            _ => Err(Error::invalid_at(
                InvalidInputKind::Malformed,
                what,
                format!("{what} is NULL with a length of {len}"),
            )),
        };
    }
    if isize::try_from(len).is_err() {
        return Err(Error::invalid_at(
            InvalidInputKind::OutOfRange,
            what,
            format!("{what} has an impossible length of {len}"),
        ));
    }
    // SAFETY: non-NULL, `len` fits in `isize`, and the caller guarantees `len` readable bytes
    // that outlive `'a` and are not written meanwhile.
    Ok(Some(unsafe { std::slice::from_raw_parts(ptr, len) }))
}

fn utf8<'a>(bytes: &'a [u8], what: &str) -> Result<&'a str, Error> {
    std::str::from_utf8(bytes).map_err(|error| {
        Error::invalid_at(
            InvalidInputKind::Malformed,
            what,
            format!("{what} is not valid UTF-8 (at byte {})", error.valid_up_to()),
        )
    })
}

/// A required UTF-8 string.
///
/// # Safety
/// As for [`borrow`].
pub(super) unsafe fn required_str<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a str, Error> {
    // SAFETY: forwarded from the caller.
    match unsafe { borrow(ptr, len, what) }? {
        Some(bytes) => utf8(bytes, what),
        None => Err(null(what)),
    }
}

/// An optional UTF-8 string: `(NULL, 0)` is absent.
///
/// # Safety
/// As for [`borrow`].
pub(super) unsafe fn optional_str<'a>(ptr: *const u8, len: usize, what: &str) -> Result<Option<&'a str>, Error> {
    // SAFETY: forwarded from the caller.
    unsafe { borrow(ptr, len, what) }?.map(|bytes| utf8(bytes, what)).transpose()
}

fn json(text: &str, what: &str) -> Result<Value, Error> {
    if text.len() > crate::limits::HARD_MAX_JSON_BYTES {
        return Err(Error::invalid_at(
            InvalidInputKind::TooLarge,
            what,
            format!(
                "{what} is {} bytes, over the {} bytes any JSON input may have",
                text.len(),
                crate::limits::HARD_MAX_JSON_BYTES
            ),
        ));
    }
    parse_json(text).map_err(|error| Error::InvalidInput(InvalidInput::from(error).prefixed(&format!("{what}: "))))
}

/// A required UTF-8 JSON document.
///
/// # Safety
/// As for [`borrow`].
pub(super) unsafe fn required_json(ptr: *const u8, len: usize, what: &str) -> Result<Value, Error> {
    // SAFETY: forwarded from the caller.
    json(unsafe { required_str(ptr, len, what) }?, what)
}

/// An optional UTF-8 JSON document: `(NULL, 0)` is absent.
///
/// # Safety
/// As for [`borrow`].
pub(super) unsafe fn optional_json(ptr: *const u8, len: usize, what: &str) -> Result<Option<Value>, Error> {
    // SAFETY: forwarded from the caller.
    unsafe { optional_str(ptr, len, what) }?.map(|text| json(text, what)).transpose()
}

/// An out-parameter, checked before any work is done and written only once it succeeded.
pub(super) struct Out<T>(*mut T);

impl<T> Out<T> {
    /// NULL is refused: the caller must receive this output.
    pub(super) fn required(ptr: *mut T, what: &str) -> Result<Out<T>, Error> {
        if ptr.is_null() {
            return Err(null(what));
        }
        Ok(Out(ptr))
    }

    /// NULL means the caller does not want this output; writing it is then a no-op.
    pub(super) fn optional(ptr: *mut T) -> Out<T> {
        Out(ptr)
    }

    /// # Safety
    /// The pointer given at construction is NULL (only for `optional`) or valid for one write.
    pub(super) unsafe fn write(self, value: T) {
        if !self.0.is_null() {
            // SAFETY: non-NULL, and the caller guarantees it is valid for writes. `write` does
            // not read or drop whatever the caller left there.
            unsafe { self.0.write(value) }
        }
    }
}

impl Out<warden_buf> {
    /// # Safety
    /// As for [`Out::write`].
    pub(super) unsafe fn write_json(self, value: &Value) {
        if !self.0.is_null() {
            // SAFETY: forwarded from the caller.
            unsafe { self.write(warden_buf::from_json(value)) }
        }
    }

    /// Write JSON text serialized already (a record written straight from its fields).
    ///
    /// # Safety
    /// As for [`Out::write`].
    pub(super) unsafe fn write_json_text(self, text: Vec<u8>) {
        if !self.0.is_null() {
            // SAFETY: forwarded from the caller.
            unsafe { self.write(warden_buf::from_vec(text)) }
        }
    }
}

/// Write the error object for `error` to `err`, when `err` is not NULL.
///
/// # Safety
/// `err` is NULL or valid for one write.
pub(super) unsafe fn report(err: *mut warden_buf, error: &Error) {
    // SAFETY: forwarded from the caller.
    unsafe { Out::optional(err).write_json(&error_json(error)) }
}
