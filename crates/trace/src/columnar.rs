//! A whole trace held as columns: compact, cache friendly, and the shape Parquet stores.

use crate::request::{CommandId, Commands, Op, Request};

/// Requests in arrival order, one vector per field. `pid` uses `u32::MAX` for "none"
/// internally so that the column stays a plain vector.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub ts_ns: Vec<u64>,
    pid: Vec<u32>,
    pub command: Vec<CommandId>,
    pub device: Vec<u32>,
    pub sector: Vec<u64>,
    pub sectors: Vec<u32>,
    /// `true` for writes.
    pub write: Vec<bool>,
    /// Names for the ids in `command`.
    pub commands: Commands,
}

const NO_PID: u32 = u32::MAX;

impl Trace {
    pub fn len(&self) -> usize {
        self.ts_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ts_ns.is_empty()
    }

    pub fn push(&mut self, r: Request) {
        debug_assert!(r.pid != Some(NO_PID), "pid u32::MAX is reserved");
        self.ts_ns.push(r.ts_ns);
        self.pid.push(r.pid.unwrap_or(NO_PID));
        self.command.push(r.command);
        self.device.push(r.device);
        self.sector.push(r.sector);
        self.sectors.push(r.sectors);
        self.write.push(r.op.is_write());
    }

    pub fn pid(&self, i: usize) -> Option<u32> {
        match self.pid[i] {
            NO_PID => None,
            p => Some(p),
        }
    }

    pub fn get(&self, i: usize) -> Request {
        Request {
            ts_ns: self.ts_ns[i],
            pid: self.pid(i),
            command: self.command[i],
            device: self.device[i],
            sector: self.sector[i],
            sectors: self.sectors[i],
            op: if self.write[i] { Op::Write } else { Op::Read },
        }
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = Request> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}
