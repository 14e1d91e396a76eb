//! What the server serves: the [`Export`] backend trait, and the [`RequestObserver`] hook
//! through which the engine's recorder sees every request the server answered.

use std::io;
use std::sync::Arc;

use crate::proto;

/// A byte-addressed device the server exports. Every method may be called from several
/// threads at once (one connection runs several workers, and several connections share
/// one export), so implementations use positioned I/O or their own locking.
///
/// Offsets and lengths are checked against [`Export::size_bytes`] before any call.
pub trait Export: Send + Sync {
    /// Size of the export in bytes; fixed for the life of a connection.
    fn size_bytes(&self) -> u64;
    /// Fills `buf` with the bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes `buf` at `offset`; with `fua`, returns only once the bytes are durable.
    fn write_at(&self, buf: &[u8], offset: u64, fua: bool) -> io::Result<()>;
    /// Makes every write that completed before this call durable, whichever connection
    /// issued it (this is what lets the server advertise multi-conn).
    fn flush(&self) -> io::Result<()>;
    /// Hint that `len` bytes at `offset` are no longer needed; contents become unspecified.
    fn trim(&self, offset: u64, len: u64, fua: bool) -> io::Result<()>;
    /// Makes `len` bytes at `offset` read as zero; `may_trim` allows deallocating them
    /// (false when the client sent `NO_HOLE`).
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool, may_trim: bool) -> io::Result<()>;
    /// True when a flush on one connection covers writes completed on every other
    /// connection to this export (no per-connection cache). Advertised as `CAN_MULTI_CONN`.
    fn can_multi_conn(&self) -> bool;
    /// True when the export refuses writes. Advertised as `READ_ONLY`.
    fn read_only(&self) -> bool;
    /// One line for humans (`NBD_INFO_DESCRIPTION`, `NBD_OPT_LIST`).
    fn describe(&self) -> String {
        String::new()
    }
    /// Preferred I/O size in bytes, a power of two (`NBD_INFO_BLOCK_SIZE`).
    fn preferred_block_bytes(&self) -> u32 {
        4096
    }
    /// A connection entered (`true`) or left (`false`) transmission on this export, so a
    /// backend can report how many clients it serves.
    fn connection_changed(&self, _opened: bool) {}
    /// NBD BLOCK_STATUS in the `base:allocation` context: (bytes, flags) extents in order
    /// from `offset`, flags from [`proto::STATE_HOLE`] and [`proto::STATE_ZERO`], together
    /// covering at least one byte and at most `len`. By default everything is allocated
    /// data, which is always a true answer.
    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<(u64, u32)>> {
        let _ = offset;
        Ok(vec![(len, 0)])
    }
}

/// The operation of one served request, as the recorder sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Read,
    Write,
    Flush,
    Trim,
    WriteZeroes,
    BlockStatus,
    /// A request refused before it reached the export (unknown command, bad flags...).
    Invalid,
}

/// One request the server answered; handed to the [`RequestObserver`] after the reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestEvent {
    /// Connection number, unique for the server's lifetime, counting from 1.
    pub connection_id: u64,
    pub op: Op,
    pub offset_bytes: u64,
    pub length_bytes: u32,
    pub fua: bool,
    /// When the request header was read, in nanoseconds since the server started.
    pub ts_ns: u64,
    /// From reading the header to the reply being sent, in nanoseconds.
    pub duration_ns: u64,
    /// NBD error value of the reply (0 on success).
    pub errno: u32,
}

/// Sees every request the server answered, from every connection and worker thread at
/// once: implementations must be cheap and thread-safe (the call sits on a worker thread
/// between two requests).
pub trait RequestObserver: Send + Sync {
    fn observe(&self, event: &RequestEvent);
}

/// Maps a backend error to the NBD error value the protocol allows (its list is short:
/// EPERM, EIO, ENOMEM, EINVAL, ENOSPC, EOVERFLOW, ESHUTDOWN; EDQUOT and EFBIG become
/// ENOSPC as the protocol asks; anything else is EIO).
pub fn nbd_errno(e: &io::Error) -> u32 {
    if let Some(os) = e.raw_os_error() {
        return match os {
            libc::EPERM | libc::EACCES | libc::EROFS => proto::EPERM,
            libc::ENOMEM => proto::ENOMEM,
            libc::EINVAL => proto::EINVAL,
            libc::ENOSPC | libc::EDQUOT | libc::EFBIG => proto::ENOSPC,
            libc::EOVERFLOW => proto::EOVERFLOW,
            libc::ESHUTDOWN => proto::ESHUTDOWN,
            _ => proto::EIO,
        };
    }
    match e.kind() {
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => proto::EPERM,
        io::ErrorKind::InvalidInput => proto::EINVAL,
        io::ErrorKind::OutOfMemory => proto::ENOMEM,
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded | io::ErrorKind::FileTooLarge => {
            proto::ENOSPC
        }
        _ => proto::EIO,
    }
}

/// The exports a server offers, by name. The first one added is the default export,
/// served to clients that ask for the empty name.
#[derive(Clone, Default)]
pub struct ExportSet {
    entries: Vec<(String, Arc<dyn Export>)>,
}

impl ExportSet {
    pub fn new() -> ExportSet {
        ExportSet::default()
    }

    /// A set holding one export, which is also the default.
    pub fn single(name: &str, export: Arc<dyn Export>) -> io::Result<ExportSet> {
        let mut set = ExportSet::new();
        set.add(name, export)?;
        Ok(set)
    }

    /// Adds an export; names must be valid protocol strings and unique.
    pub fn add(&mut self, name: &str, export: Arc<dyn Export>) -> io::Result<()> {
        let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
        proto::parse_string(name.as_bytes())
            .map_err(|why| invalid(format!("export name {name:?}: {why}")))?;
        if self.entries.iter().any(|(n, _)| n == name) {
            return Err(invalid(format!("export name {name:?}: defined twice")));
        }
        self.entries.push((name.to_owned(), export));
        Ok(())
    }

    /// The export called `name`; the empty name selects the default export.
    pub fn find(&self, name: &str) -> Option<(&str, &Arc<dyn Export>)> {
        let hit = if name.is_empty() {
            self.entries.first()
        } else {
            self.entries.iter().find(|(n, _)| n == name)
        };
        hit.map(|(n, e)| (n.as_str(), e))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<dyn Export>)> {
        self.entries.iter().map(|(n, e)| (n.as_str(), e))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping_uses_protocol_values() {
        let os = |n| nbd_errno(&io::Error::from_raw_os_error(n));
        assert_eq!(os(libc::EDQUOT), 28);
        assert_eq!(os(libc::EFBIG), 28);
        assert_eq!(os(libc::EROFS), 1);
        assert_eq!(os(libc::ENXIO), 5);
        assert_eq!(os(libc::EINVAL), 22);
        assert_eq!(
            nbd_errno(&io::Error::new(io::ErrorKind::InvalidInput, "x")),
            22
        );
        assert_eq!(nbd_errno(&io::Error::other("x")), 5);
    }
}
