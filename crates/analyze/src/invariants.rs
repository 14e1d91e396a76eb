//! Statistics that agree with each other: the relations every [`Analysis`] must satisfy,
//! whatever the trace (unique never above total, idle never above the duration, fractions
//! in [0, 1], counts that add up). Checked by a debug assertion where the analysis is
//! made and by property tests over random and adversarial traces.

use crate::{Analysis, ByteTotals};

/// One way an analysis contradicts itself.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Contradiction {
    #[error("{granularity}: unique {what} bytes ({unique}) exceed the total ({total})")]
    UniqueAboveTotal {
        granularity: &'static str,
        what: &'static str,
        unique: u64,
        total: u64,
    },
    #[error(
        "{granularity}: unique bytes ({both}) are not between the larger of unique read and \
         written ({larger}) and their sum ({sum})"
    )]
    UnionOutOfBounds {
        granularity: &'static str,
        both: u64,
        larger: u64,
        sum: u64,
    },
    #[error("sector-exact {what} bytes ({exact}) exceed the page-rounded ones ({rounded})")]
    ExactAboveRounded {
        what: &'static str,
        exact: u64,
        rounded: u64,
    },
    #[error("idle time {what} ({idle_ns} ns) exceeds the trace's duration ({duration_ns} ns)")]
    IdleAboveDuration {
        what: &'static str,
        idle_ns: u64,
        duration_ns: u64,
    },
    #[error("{what} = {value} is not a fraction in [0, 1]")]
    FractionOutOfRange { what: &'static str, value: f64 },
    #[error("{what}: the parts add up to {parts}, not {whole}")]
    CountsDisagree {
        what: &'static str,
        parts: u64,
        whole: u64,
    },
}

impl Analysis {
    /// Every relation this analysis breaks (none, for a correct analyzer). The fraction
    /// of the device touched is left out: it exceeds 1 when `--device-size` is smaller
    /// than what the trace addresses, which is the user's figure, not a contradiction.
    pub fn contradictions(&self) -> Vec<Contradiction> {
        let mut out = Vec::new();
        totals("sector-exact", &self.sector_exact, &mut out);
        totals("page-rounded", &self.page_rounded, &mut out);
        exact_within_rounded(self, &mut out);
        idle_within_duration(self, &mut out);
        fractions(self, &mut out);
        counts(self, &mut out);
        out
    }
}

fn totals(granularity: &'static str, t: &ByteTotals, out: &mut Vec<Contradiction>) {
    for (what, unique, total) in [
        ("read", t.unique_read_bytes, t.read_bytes),
        ("written", t.unique_write_bytes, t.write_bytes),
        ("read or written", t.unique_bytes, t.total_bytes),
    ] {
        if unique > total {
            out.push(Contradiction::UniqueAboveTotal {
                granularity,
                what,
                unique,
                total,
            });
        }
    }
    let larger = t.unique_read_bytes.max(t.unique_write_bytes);
    let sum = t.unique_read_bytes + t.unique_write_bytes;
    if t.unique_bytes < larger || t.unique_bytes > sum {
        out.push(Contradiction::UnionOutOfBounds {
            granularity,
            both: t.unique_bytes,
            larger,
            sum,
        });
    }
    if t.read_bytes + t.write_bytes != t.total_bytes {
        out.push(Contradiction::CountsDisagree {
            what: "read and written bytes",
            parts: t.read_bytes + t.write_bytes,
            whole: t.total_bytes,
        });
    }
}

/// A sector counted is in a page counted: exact figures never exceed rounded ones.
fn exact_within_rounded(a: &Analysis, out: &mut Vec<Contradiction>) {
    let (e, r) = (&a.sector_exact, &a.page_rounded);
    for (what, exact, rounded) in [
        ("total", e.total_bytes, r.total_bytes),
        ("unique read", e.unique_read_bytes, r.unique_read_bytes),
        ("unique written", e.unique_write_bytes, r.unique_write_bytes),
        ("unique", e.unique_bytes, r.unique_bytes),
    ] {
        if exact > rounded {
            out.push(Contradiction::ExactAboveRounded {
                what,
                exact,
                rounded,
            });
        }
    }
}

fn idle_within_duration(a: &Analysis, out: &mut Vec<Contradiction>) {
    let t = &a.timing;
    for (what, idle_ns) in [("in all", t.idle.total_ns), ("longest", t.idle.longest_ns)] {
        if idle_ns > t.duration_ns {
            out.push(Contradiction::IdleAboveDuration {
                what,
                idle_ns,
                duration_ns: t.duration_ns,
            });
        }
    }
}

fn fractions(a: &Analysis, out: &mut Vec<Contradiction>) {
    let named = [
        ("read_fraction", a.read_fraction),
        ("top20_access_share", a.top20_access_share),
        ("partial_determinism", a.partial_determinism),
        ("sequential_fraction", a.sequential_fraction),
        (
            "idle fraction_of_duration",
            a.timing.idle.fraction_of_duration,
        ),
    ];
    let overlaps = a.intervals.iter().flat_map(|i| {
        [
            ("working set overlap", Some(i.overlap)),
            ("working set overlap_top20", Some(i.overlap_top20)),
        ]
    });
    for (what, value) in named.into_iter().chain(overlaps) {
        match value {
            Some(value) if !(0.0..=1.0).contains(&value) => {
                out.push(Contradiction::FractionOutOfRange { what, value })
            }
            _ => {}
        }
    }
}

fn counts(a: &Analysis, out: &mut Vec<Contradiction>) {
    let mut check = |what, parts, whole| {
        if parts != whole {
            out.push(Contradiction::CountsDisagree { what, parts, whole });
        }
    };
    check("reads and writes", a.reads + a.writes, a.requests);
    let histogram = a.request_size_histogram.iter().map(|b| b.requests).sum();
    check("request size histogram", histogram, a.requests);
    check("request sizes", a.request_size_bytes.count, a.requests);
    let gaps = a.timing.interarrival_ns.count;
    check("inter-arrival gaps", gaps + 1, a.requests.max(1));
    let t = &a.determinism;
    check(
        "sequential and non-sequential transitions",
        t.sequential_transitions + t.non_sequential_transitions,
        t.transitions,
    );
}
