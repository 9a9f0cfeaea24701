//! The messages between a store's owner process and the other processes using the store, over
//! the owner's Unix socket: length-prefixed JSON frames (a `u32` little-endian length, then
//! that many bytes), one request or answer per frame.

use std::io::{Read, Write};

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::clock::Micros;
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};

/// Bumped whenever a message changes meaning or encoding; both ends must agree.
/// 2: a store fault crosses as its kind and message (`StoreFault`), no longer as bare text.
/// 3: a write's answer says how many writes its commit carried (`Down::Wrote::together`).
/// 4: a resolution names the attempt its author saw (`Write::Resolve::expect_attempt`); an
///    owner that dropped the field would resolve whichever attempt is ambiguous.
/// 5: invalid input crosses as its kind, path and message (`InvalidInput`), no longer as bare
///    text.
pub(in crate::store) const PROTOCOL: u32 = 5;

/// The largest frame either end accepts (requests are bounded far below this by the kernel's
/// input limits; snapshot pages and event lists by their page sizes).
pub(in crate::store) const MAX_FRAME: usize = 256 * 1024 * 1024;

/// From a process using the store to its owner.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(in crate::store) enum Up<W, R> {
    Hello {
        protocol: u32,
        pid: u32,
    },
    /// Apply a write. `now` is set only when the caller runs on a clock of its own (a manual
    /// test clock); otherwise the owner reads the system clock inside the transaction.
    Write {
        id: u64,
        op: W,
        deferred: bool,
        now: Option<Micros>,
    },
    Read {
        id: u64,
        op: R,
        now: Option<Micros>,
    },
    /// The answer to `Goodbye`: nothing more will be sent on this connection.
    Bye,
}

/// From the owner to a process using the store.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(in crate::store) enum Down<WR, RR> {
    Welcome {
        protocol: u32,
        owner_pid: u32,
        dev: u64,
        ino: u64,
    },
    Refused {
        message: String,
    },
    Wrote {
        id: u64,
        result: std::result::Result<Option<WR>, Error>,
        /// How many writes the commit that made this one durable carried (`Written::together`).
        together: u32,
    },
    Read {
        id: u64,
        result: std::result::Result<RR, Error>,
    },
    /// Not applied: the owner is handing the store over; send it to the next owner.
    Moved {
        id: u64,
    },
    /// The owner is closing: answer `Bye`, then expect the answers still owed and the end.
    Goodbye,
}

pub(in crate::store) fn send<T: Serialize>(stream: &mut impl Write, message: &T) -> Result<()> {
    let body = serde_json::to_vec(message)
        .map_err(|e| Error::store(StoreFaultKind::Defect, format!("cannot encode a store message: {e}")))?;
    if body.len() > MAX_FRAME {
        return Err(Error::invalid(
            InvalidInputKind::TooLarge,
            format!("a store message of {} bytes is over the {MAX_FRAME}-byte frame limit", body.len()),
        ));
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(&body);
    stream.write_all(&frame).map_err(lost)
}

/// The next frame, or `Ok(None)` at a clean end of the stream.
pub(in crate::store) fn receive<T: DeserializeOwned>(stream: &mut impl Read) -> Result<Option<T>> {
    let mut length = [0u8; 4];
    match stream.read_exact(&mut length) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(lost(error)),
    }
    let length = u32::from_le_bytes(length) as usize;
    if length > MAX_FRAME {
        return Err(Error::Unavailable(format!("a store message announced {length} bytes, over the frame limit")));
    }
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).map_err(lost)?;
    serde_json::from_slice(&body).map(Some).map_err(|e| {
        Error::Unavailable(format!("a store message could not be read ({e}); the other end speaks another version"))
    })
}

fn lost(error: std::io::Error) -> Error {
    Error::Unavailable(format!("the connection to the store's owner process broke: {error}"))
}
