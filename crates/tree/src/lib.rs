//! Static layout of tree-structured data (the dissertation's chapter 2): XML documents as
//! node trees with on-disk sizes ([`doc`]), grouped into one-block supernodes three ways
//! ([`group`]), placed on a disk model by the default, tree-structured and optimized
//! placements ([`place`]), navigated by XPath queries ([`xpath`]) whose reads are
//! classified ([`access`]) and replayed on the drive model, next to the analytic model
//! ([`model`]). [`study`] runs all of it for one document; [`xmark`] generates
//! XMark-like documents and [`queries`] holds XPathMark-style query sets.

pub mod access;
pub mod doc;
pub mod error;
pub mod group;
pub mod model;
pub mod place;
pub mod queries;
pub mod report;
pub mod study;
pub mod xmark;
pub mod xpath;

pub use error::TreeError;
