//! The one request record every stage shares (DESIGN.md "Units and formats").

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::FieldError;

/// Traces address 512-byte sectors, whatever the device's real block size.
pub const SECTOR_BYTES: u64 = 512;

/// The largest sector a request may end at (exclusive end): the one whose byte offset is
/// the last multiple of 512 that fits in 64 bits. Every stage computes byte offsets as
/// `sector * 512` in a `u64` (files, NBD, the engine's image), so a request ending further
/// out cannot be addressed anywhere and a reader refuses it instead of letting the
/// arithmetic wrap.
pub const MAX_END_SECTOR: u64 = u64::MAX / SECTOR_BYTES;

/// Why a request's address or size is not one a trace may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// A length of 0 sectors (no data: not a request).
    #[error("a request of 0 sectors")]
    Empty,
    /// `sector + sectors` is past [`MAX_END_SECTOR`] (or past 2^64 sectors altogether).
    #[error(
        "sector {sector} + {sectors} sectors ends past the last addressable sector \
         ({MAX_END_SECTOR}, the end of a 64-bit byte address space)"
    )]
    PastEnd { sector: u64, sectors: u32 },
}

impl RequestError {
    /// As the error of one line's field: `sector_field` and `size_field` are what the
    /// trace format calls the start address and the length (`lba`, `offset`, `size`...).
    pub fn field_error(self, sector_field: &'static str, size_field: &'static str) -> FieldError {
        let field = match self {
            RequestError::Empty => size_field,
            RequestError::PastEnd { .. } => sector_field,
        };
        FieldError::new(field, self.to_string())
    }
}

/// A discard (TRIM) a trace holds: sectors its file system told the device are free.
/// Readers keep discards beside the requests ([`crate::TraceReader::discards`]), not
/// among them: a discard moves no data, and every consumer of requests expects data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Discard {
    pub ts_ns: u64,
    pub device: u32,
    pub sector: u64,
    pub sectors: u32,
}

/// Read or write. Trims, flushes and other non-data requests are not traced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Read,
    Write,
}

impl Op {
    pub fn is_write(self) -> bool {
        self == Op::Write
    }
    /// The one-letter spelling used by the native format and Parquet.
    pub fn letter(self) -> char {
        match self {
            Op::Read => 'R',
            Op::Write => 'W',
        }
    }
}

/// Index into a [`Commands`] table. Interned so that a request is `Copy` and small.
pub type CommandId = u32;

/// The command id of requests whose trace carries no process name.
pub const NO_COMMAND: CommandId = 0;

/// One block request, as issued by a process to a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// Time the request was queued, in nanoseconds from the trace's own origin.
    pub ts_ns: u64,
    /// Issuing process, when the trace records it.
    pub pid: Option<u32>,
    /// Issuing command (process name), interned in the reader's [`Commands`].
    pub command: CommandId,
    /// Device (or disk number) the request addresses; 0 when the trace has one device.
    pub device: u32,
    /// First 512-byte sector.
    pub sector: u64,
    /// Length in 512-byte sectors (> 0).
    pub sectors: u32,
    pub op: Op,
}

impl Request {
    /// A request whose address and size are checked: the constructor every reader uses
    /// (text lines and Parquet rows alike), so that no trace hands out a request whose end
    /// or byte offset overflows.
    pub fn try_new(
        ts_ns: u64,
        pid: Option<u32>,
        command: CommandId,
        device: u32,
        sector: u64,
        sectors: u32,
        op: Op,
    ) -> Result<Request, RequestError> {
        let r = Request {
            ts_ns,
            pid,
            command,
            device,
            sector,
            sectors,
            op,
        };
        r.check()?;
        Ok(r)
    }

    /// Whether this request is one a reader may hand out: a positive length ending at or
    /// before [`MAX_END_SECTOR`] (so `end_sector` and byte offsets cannot overflow).
    #[inline]
    pub fn check(&self) -> Result<(), RequestError> {
        Self::check_extent(self.sector, self.sectors)
    }

    /// The address rule alone: `sectors` from `sector` is a non-empty extent whose end
    /// is addressable in bytes. Readers that hold columns rather than requests (Parquet)
    /// call it before building one.
    pub fn check_extent(sector: u64, sectors: u32) -> Result<(), RequestError> {
        if sectors == 0 {
            return Err(RequestError::Empty);
        }
        match sector.checked_add(u64::from(sectors)) {
            Some(end) if end <= MAX_END_SECTOR => Ok(()),
            _ => Err(RequestError::PastEnd { sector, sectors }),
        }
    }

    /// One past the last sector. Requests from a reader never overflow here (see
    /// [`Request::check`]); one built by hand past 2^64 sectors saturates rather than wraps.
    #[inline]
    pub fn end_sector(&self) -> u64 {
        self.sector.saturating_add(u64::from(self.sectors))
    }
    pub fn bytes(&self) -> u64 {
        u64::from(self.sectors) * SECTOR_BYTES
    }
}

/// Interned command names. Id 0 is always the empty name ("no command").
#[derive(Clone, Debug)]
pub struct Commands {
    names: Vec<Arc<str>>,
    ids: HashMap<Arc<str>, CommandId>,
}

impl Default for Commands {
    fn default() -> Self {
        let empty: Arc<str> = Arc::from("");
        let mut ids = HashMap::new();
        ids.insert(empty.clone(), NO_COMMAND);
        Commands {
            names: vec![empty],
            ids,
        }
    }
}

impl Commands {
    pub fn new() -> Self {
        Self::default()
    }
    /// The id of `name`, adding it when new. The empty name is [`NO_COMMAND`].
    pub fn intern(&mut self, name: &str) -> CommandId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = CommandId::try_from(self.names.len()).expect("more than 2^32 commands");
        let name: Arc<str> = Arc::from(name);
        self.names.push(name.clone());
        self.ids.insert(name, id);
        id
    }
    /// The name of `id`; panics on an id this table never handed out.
    pub fn name(&self, id: CommandId) -> &str {
        &self.names[id as usize]
    }
    pub fn len(&self) -> usize {
        self.names.len()
    }
    pub fn is_empty(&self) -> bool {
        self.names.len() == 1
    }
    pub fn iter(&self) -> impl Iterator<Item = (CommandId, &str)> {
        self.names
            .iter()
            .enumerate()
            .map(|(i, n)| (i as CommandId, n.as_ref()))
    }
}
