//! Where a logical request's data lives. The layout's indirector (seed 001 Algorithm 5)
//! plugs in here: one logical request may become several physical extents, some in the
//! optimized region, some at home. Replay asks the mapper and never decides placement
//! itself (DESIGN.md: one piece of code decides where a request goes).

use reblock_device::DevRequest;

/// Turns a logical request into the physical extents that serve it.
pub trait Mapper: Send {
    /// Appends to `out` the extents serving `req`, each in the array's logical space.
    /// They are served in parallel; the request completes with the last of them.
    fn map(&mut self, req: &DevRequest, out: &mut Vec<DevRequest>);
}

/// Every request is served where it is addressed: the plain (vanilla) layout.
#[derive(Clone, Copy, Debug, Default)]
pub struct Identity;

impl Mapper for Identity {
    fn map(&mut self, req: &DevRequest, out: &mut Vec<DevRequest>) {
        out.push(*req);
    }
}
