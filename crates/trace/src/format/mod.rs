//! Trace formats: one file each, behind the small [`LineFormat`] trait, registered in
//! [`formats`] (adding a format is one new file plus one line there).

use crate::error::FieldError;
use crate::request::{Commands, Request};

pub mod native;

pub use native::Native;

/// What a line turned out to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    Request(Request),
    /// A header, comment, or an event that is not a queued request (e.g. blkparse 'C').
    Skip,
}

/// State a reader carries from line to line of one file.
#[derive(Debug, Default)]
pub struct ParseState {
    /// Command names interned so far.
    pub commands: Commands,
}

/// A text trace format read one line at a time.
pub trait LineFormat: Send + Sync {
    /// The name users pass to `--format`.
    fn name(&self) -> &'static str;
    /// One line saying what the format is, listed when a format is unknown.
    fn describe(&self) -> &'static str;
    /// Whether these first non-empty lines of a file look like this format. Must be strict
    /// enough that at most one format claims a real file: `auto` never guesses.
    fn sniff(&self, lines: &[&str]) -> bool;
    /// Parse one line (without its newline). Errors name the field that is wrong.
    fn parse(&self, line: &str, state: &mut ParseState) -> Result<Parsed, FieldError>;
}

/// Every line format, in the order `--format auto` tries them.
pub fn formats() -> &'static [&'static dyn LineFormat] {
    &[&Native]
}

/// The format called `name`, if any.
pub fn by_name(name: &str) -> Option<&'static dyn LineFormat> {
    formats().iter().copied().find(|f| f.name() == name)
}

/// Helpers shared by the format files, so that every format reports errors alike.
pub mod field {
    use super::FieldError;

    pub fn u64(field: &'static str, s: Option<&str>) -> Result<u64, FieldError> {
        let s = s.ok_or_else(|| FieldError::new(field, "missing"))?;
        s.parse::<u64>()
            .map_err(|_| FieldError::new(field, format!("'{s}' is not a non-negative integer")))
    }

    pub fn u32(field: &'static str, s: Option<&str>) -> Result<u32, FieldError> {
        let s = s.ok_or_else(|| FieldError::new(field, "missing"))?;
        s.parse::<u32>().map_err(|_| {
            FieldError::new(field, format!("'{s}' is not an integer in 0..=4294967295"))
        })
    }

    /// A request length in sectors: positive.
    pub fn sectors(field: &'static str, s: Option<&str>) -> Result<u32, FieldError> {
        let n = u32(field, s)?;
        if n == 0 {
            return Err(FieldError::new(field, "a request of 0 sectors"));
        }
        Ok(n)
    }

    pub fn present<'a>(field: &'static str, s: Option<&'a str>) -> Result<&'a str, FieldError> {
        s.ok_or_else(|| FieldError::new(field, "missing"))
    }

    /// Fails when a line has more fields than the format defines.
    pub fn end<'a>(mut rest: impl Iterator<Item = &'a str>) -> Result<(), FieldError> {
        match rest.next() {
            None => Ok(()),
            Some(extra) => Err(FieldError::new(
                "line",
                format!("unexpected extra field '{extra}'"),
            )),
        }
    }
}
