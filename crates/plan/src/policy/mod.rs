//! Layout policies: each turns the master access graph into a [`Placement`].
//!
//! Adding a policy is one new file here plus one line in [`POLICIES`].

mod borg;
mod dlr_frag;
mod dlr_seq;
mod fs2;
mod hot;
mod vanilla;

pub use borg::Borg;
pub use dlr_frag::DlrFrag;
pub use dlr_seq::DlrSeq;
pub use fs2::{replica_ranges, BorgFs2, Fs2, HOT_AREA_BYTES};
pub use hot::Hot;
pub use vanilla::Vanilla;

use crate::master::{MasterGraph, VertexId};
use crate::placement::{PageClaims, Placement, PlanParams, TargetSpace};

/// What a policy's placements ask of whoever applies them. The CLI, `evaluate` and the
/// engine consult this registry entry instead of telling policies apart by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Where the policy puts pages: into the BOPT's read cache (a second copy), into the
    /// data area itself (a permutation, no second copy), or nowhere (`None`).
    pub places: Option<TargetSpace>,
    /// Whether it also keeps FS2 replicas of hot pages in the device's free space
    /// ([`Placement::replicas`]): whoever applies it must know which pages are free and
    /// route each read to the copy closest to the head.
    pub replicates: bool,
}

impl Capabilities {
    /// Whether the online engine can apply its plans (it re-plans the read cache only;
    /// a policy that places nothing runs anywhere; the engine makes FS2 replicas in the
    /// free space its map knows).
    pub fn online(&self) -> bool {
        self.offline_only_reason().is_none()
    }

    /// Why the online engine cannot apply this policy's plans, if it cannot.
    pub fn offline_only_reason(&self) -> Option<&'static str> {
        if self.places == Some(TargetSpace::DataArea) {
            Some(
                "it permutes pages inside the data area, which the engine cannot apply \
                 online (it re-plans the BOPT's read cache only)",
            )
        } else {
            None
        }
    }
}

/// A layout policy: decides, never moves data.
pub trait Policy: Sync {
    /// The name used on the command line and in reports.
    fn name(&self) -> &'static str;
    /// One line for `--help` and reports: what it does and which seed it follows.
    fn about(&self) -> &'static str;
    fn plan(&self, graph: &MasterGraph, params: &PlanParams) -> Placement;
    /// What its placements need (see [`Capabilities`]).
    fn capabilities(&self) -> Capabilities;
}

/// Every policy, in the order reports list them.
static POLICIES: &[&dyn Policy] = &[&Vanilla, &Hot, &Borg, &DlrSeq, &DlrFrag, &Fs2, &BorgFs2];

pub fn policies() -> &'static [&'static dyn Policy] {
    POLICIES
}

/// A policy name nobody registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy `{name}` (known: {known})")]
pub struct UnknownPolicy {
    pub name: String,
    pub known: String,
}

pub fn by_name(name: &str) -> Result<&'static dyn Policy, UnknownPolicy> {
    POLICIES
        .iter()
        .copied()
        .find(|p| p.name() == name)
        .ok_or_else(|| UnknownPolicy {
            name: name.to_string(),
            known: POLICIES
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// The page range each vertex of `order` contributes, in order, each page once.
pub(crate) fn claim_pages(
    graph: &MasterGraph,
    order: impl IntoIterator<Item = VertexId>,
    params: &PlanParams,
) -> Vec<(u64, u64)> {
    let mut claims = PageClaims::new(params.page_sectors());
    order.into_iter().map(|v| claims.claim(graph, v)).collect()
}

/// Page ranges laid one after another in the read cache from slot `first_slot`.
pub(crate) fn place_consecutively(
    placement: &mut Placement,
    spans: &[(u64, u64)],
    first_slot: u64,
) {
    let mut slot = first_slot;
    for &(lo, hi) in spans {
        placement.push(lo, hi - lo, slot);
        slot += hi - lo;
    }
}
