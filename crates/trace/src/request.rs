//! The one request record every stage shares (DESIGN.md "Units and formats").

use std::collections::HashMap;
use std::sync::Arc;

/// Traces address 512-byte sectors, whatever the device's real block size.
pub const SECTOR_BYTES: u64 = 512;

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
    /// One past the last sector.
    pub fn end_sector(&self) -> u64 {
        self.sector + u64::from(self.sectors)
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
