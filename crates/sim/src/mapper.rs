//! Where a logical request's data lives. The layout's indirector (seed 001 Algorithm 5)
//! plugs in here: one logical request may become several physical extents, some in the
//! optimized region, some at home. Replay asks the mapper and never decides placement
//! itself (DESIGN.md: one piece of code decides where a request goes).

use reblock_device::DevRequest;

use crate::purpose::Purpose;

/// Turns a logical request into the physical extents that serve it.
pub trait Mapper: Send {
    /// Appends to `out` the extents serving `req`, each in the array's logical space.
    /// They are served in parallel; the request completes with the last of them.
    fn map(&mut self, req: &DevRequest, out: &mut Vec<DevRequest>);

    /// [`Mapper::map`], also saying what each extent is for: `purposes[i]` for `out[i]`
    /// (both start empty). The request completes, for its response time, with its client
    /// extents; the others (a replica written from the data it read) go on behind it,
    /// and their busy time is their purpose's. By default every extent is client data.
    fn map_for(
        &mut self,
        req: &DevRequest,
        out: &mut Vec<DevRequest>,
        purposes: &mut Vec<Purpose>,
    ) {
        self.map(req, out);
        purposes.resize(out.len(), Purpose::Client);
    }

    /// The device is about to serve `req`, an extent `map` gave (or several the queue
    /// merged): where to serve it. A read may go to another copy only when it holds
    /// exactly `req`'s data, contiguously; a write stays where it is (a mapper learns
    /// here that it reached the device). `cost` is the device's estimate of serving a
    /// request from where its head is now. Choosing here rather than in `map` keeps the
    /// queue's merging of a burst exactly the plain layout's, and sees the head the
    /// device really has (FS2: read whichever copy is closest to the head). By default
    /// `req` itself.
    fn dispatch(&mut self, req: &DevRequest, cost: &dyn Fn(&DevRequest) -> u64) -> DevRequest {
        let _ = cost;
        *req
    }
}

/// Every request is served where it is addressed: the plain (vanilla) layout.
#[derive(Clone, Copy, Debug, Default)]
pub struct Identity;

impl Mapper for Identity {
    fn map(&mut self, req: &DevRequest, out: &mut Vec<DevRequest>) {
        out.push(*req);
    }
}
