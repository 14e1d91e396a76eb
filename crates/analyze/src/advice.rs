//! Layout advice: the workload attributes of seed 001 Table 4.1 measured, levelled, and
//! matched against the table's rows to pick a layout strategy (seed 001 §4.2).
//!
//! Policy only: this module reads figures and returns a recommendation; it moves nothing.
//!
//! Table 4.1 (arrows: ↑ high, ↓ low, - no constraint), as used here:
//!
//! | strategy | temporal locality | bursts | sequentiality | partial det. | non-uniform freq. | reads dominate |
//! |---|---|---|---|---|---|---|
//! | static tree layout (§4.2.1) | - | - | ↓ | ↑ | ↓ | ↑ |
//! | dynamic BORG layout (§4.2.2) | ↓ | ↑ | ↓ | ↑ | ↑ | - |
//! | dynamic layout for static access (§4.2.3) | ↑ | ↑ | ↓ | ↑ | ↑ | - |
//! | static + dynamic (§4.2.4) | - | ↑ | ↓ | ↑ | - | - |
//! | legacy sequential (§4.2.5) | - | - | ↑ | ↓ | ↓ | - |
//!
//! (The static row's partial-determinism cell is lost in the seed's text extraction;
//! §4.2.1 lists "partial determinism indicates that non-contiguous data access patterns
//! exist" among its conditions, hence ↑.)
//!
//! Scoring: each strategy scores +1 per constrained attribute whose measured level
//! matches its arrow and -1 per one that contradicts it; unknown levels count 0. The
//! highest score wins; ties go to the strategy with fewer contradicted cells (the more
//! cautious claim), then to the order of the table. A best score of 0 or less, or an empty trace, keeps the legacy layout: nothing in
//! the workload argues for moving data.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    High,
    Low,
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    StaticTree,
    DynamicBorg,
    DynamicForStaticAccess,
    StaticPlusDynamic,
    LegacySequential,
}

impl Strategy {
    pub fn describe(self) -> &'static str {
        match self {
            Strategy::StaticTree => {
                "static tree-structured layout (the dissertation's static layout for trees)"
            }
            Strategy::DynamicBorg => "dynamic BORG-style block reorganization",
            Strategy::DynamicForStaticAccess => "dynamic layout for static access patterns",
            Strategy::StaticPlusDynamic => "static layout plus a dynamic write buffer",
            Strategy::LegacySequential => "keep the file system's sequential layout",
        }
    }
}

/// One measured attribute of Table 4.1.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Attribute {
    pub name: &'static str,
    pub value: Option<f64>,
    pub level: Level,
    /// `value >= threshold` is high.
    pub threshold: f64,
    /// What the value is and where the threshold comes from.
    pub rule: &'static str,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Advice {
    pub strategy: Strategy,
    pub summary: &'static str,
    /// The numbers that drove the choice, matched and contradicting.
    pub reasons: Vec<String>,
    pub attributes: Vec<Attribute>,
    /// Attributes whose level matches the chosen row, and those that contradict it.
    pub matched: Vec<&'static str>,
    pub against: Vec<&'static str>,
    /// Score of every strategy, in table order.
    pub scores: Vec<(Strategy, i32)>,
}

/// The measured inputs of the advice.
#[derive(Clone, Debug, Default)]
pub struct Measures {
    pub requests: u64,
    pub temporal_locality: Option<f64>,
    pub index_of_dispersion: Option<f64>,
    pub sequential_fraction: Option<f64>,
    pub partial_determinism: Option<f64>,
    pub top20_access_share: Option<f64>,
    pub read_fraction: Option<f64>,
}

pub const TEMPORAL_LOCALITY: usize = 0;
pub const BURSTS: usize = 1;
pub const SEQUENTIALITY: usize = 2;
pub const PARTIAL_DETERMINISM: usize = 3;
pub const NON_UNIFORM: usize = 4;
pub const READS: usize = 5;

fn attribute(
    name: &'static str,
    value: Option<f64>,
    threshold: f64,
    rule: &'static str,
) -> Attribute {
    let level = match value {
        Some(v) if v >= threshold => Level::High,
        Some(_) => Level::Low,
        None => Level::Unknown,
    };
    Attribute {
        name,
        value,
        level,
        threshold,
        rule,
    }
}

pub fn attributes(m: &Measures) -> Vec<Attribute> {
    vec![
        attribute("temporal_locality", m.temporal_locality, 0.5,
            "mean overlap of intervals 2..n with interval 1; high when at least half of each later working set was already used in interval 1 (BORG's workload study found large overlaps with the first day); unknown with one interval"),
        attribute("bursts", m.index_of_dispersion, 2.0,
            "index of dispersion of requests per window; Poisson arrivals give 1, high when at least twice as variable (batches with idle time between)"),
        attribute("sequentiality", m.sequential_fraction, 0.5,
            "share of per-process transitions that continue the previous request; high when most do (sequential streaming)"),
        attribute("partial_determinism", m.partial_determinism, 0.3,
            "share of non-sequential transitions that repeat; BORG's workload table calls 50.7-65.4% high and has 15.6% for the web server, 0.3 lies between"),
        attribute("non_uniform_frequency", m.top20_access_share, 0.4,
            "share of page accesses to the top 20% of pages; uniform access gives 0.2, high at twice that (BORG's workload table: 45.8-60.3%)"),
        attribute("reads_dominate", m.read_fraction, 0.5,
            "share of requests that are reads; high = read-mostly (BORG's workload study tells read-mostly from write-mostly workloads)"),
    ]
}

/// One row of Table 4.1: (attribute index, wanted level) for each constrained attribute.
type Row = Vec<(usize, Level)>;

/// Table 4.1 rows, in the table's order of preference for ties.
fn table() -> Vec<(Strategy, Row)> {
    use Level::{High, Low};
    vec![
        (
            Strategy::DynamicBorg,
            vec![
                (TEMPORAL_LOCALITY, Low),
                (BURSTS, High),
                (SEQUENTIALITY, Low),
                (PARTIAL_DETERMINISM, High),
                (NON_UNIFORM, High),
            ],
        ),
        (
            Strategy::DynamicForStaticAccess,
            vec![
                (TEMPORAL_LOCALITY, High),
                (BURSTS, High),
                (SEQUENTIALITY, Low),
                (PARTIAL_DETERMINISM, High),
                (NON_UNIFORM, High),
            ],
        ),
        (
            Strategy::StaticPlusDynamic,
            vec![
                (BURSTS, High),
                (SEQUENTIALITY, Low),
                (PARTIAL_DETERMINISM, High),
            ],
        ),
        (
            Strategy::StaticTree,
            vec![
                (SEQUENTIALITY, Low),
                (PARTIAL_DETERMINISM, High),
                (NON_UNIFORM, Low),
                (READS, High),
            ],
        ),
        (
            Strategy::LegacySequential,
            vec![
                (SEQUENTIALITY, High),
                (PARTIAL_DETERMINISM, Low),
                (NON_UNIFORM, Low),
            ],
        ),
    ]
}

fn describe(a: &Attribute, wanted: Level) -> String {
    let value = a.value.map_or("unknown".to_string(), |v| format!("{v:.3}"));
    let level = match a.level {
        Level::High => format!("high (>= {})", a.threshold),
        Level::Low => format!("low (< {})", a.threshold),
        Level::Unknown => "unknown".to_string(),
    };
    let verdict = if a.level == wanted {
        "as the strategy wants"
    } else {
        "against it"
    };
    format!("{} = {value}, {level}: {verdict}", a.name)
}

pub fn advise(m: &Measures) -> Advice {
    let attrs = attributes(m);
    let mut scores = Vec::new();
    let mut best: Option<(Strategy, i32, i32, Row)> = None;
    for (strategy, row) in table() {
        let matches = row.iter().filter(|(i, l)| attrs[*i].level == *l).count() as i32;
        let known = row
            .iter()
            .filter(|(i, _)| attrs[*i].level != Level::Unknown)
            .count() as i32;
        let against = known - matches;
        let score = matches - against;
        scores.push((strategy, score));
        if best
            .as_ref()
            .is_none_or(|b| (score, -against) > (b.1, -b.2))
        {
            best = Some((strategy, score, against, row));
        }
    }
    let (mut strategy, score, _, row) = best.expect("table is not empty");
    let known: Vec<(usize, Level)> = row
        .iter()
        .copied()
        .filter(|(i, _)| attrs[*i].level != Level::Unknown)
        .collect();
    let pick = |want_match: bool| -> Vec<&'static str> {
        known
            .iter()
            .filter(|(i, l)| (attrs[*i].level == *l) == want_match)
            .map(|(i, _)| attrs[*i].name)
            .collect()
    };
    let (mut matched, mut against) = (pick(true), pick(false));
    let mut reasons: Vec<String> = Vec::new();
    if m.requests == 0 || score <= 0 {
        matched.clear();
        against.clear();
    }
    if m.requests == 0 {
        strategy = Strategy::LegacySequential;
        reasons.push("the trace holds no requests".to_string());
    } else if score <= 0 {
        strategy = Strategy::LegacySequential;
        reasons.push(format!("no strategy of the dissertation's layout-choice table scores above 0 (best {score}): nothing argues for moving data"));
        reasons.extend(attrs.iter().map(|a| {
            let v = a.value.map_or("unknown".to_string(), |v| format!("{v:.3}"));
            format!(
                "{} = {v} ({:?}, threshold {})",
                a.name, a.level, a.threshold
            )
        }));
    } else {
        reasons.extend(
            row.iter()
                .filter(|(i, _)| attrs[*i].level != Level::Unknown)
                .map(|(i, l)| describe(&attrs[*i], *l)),
        );
        if strategy == Strategy::DynamicBorg
            && attrs[READS].level == Level::High
            && attrs[TEMPORAL_LOCALITY].level == Level::Low
        {
            reasons.push("caution: reads dominate and working sets shift; the dissertation reports BORG degrading read-intensive workloads whose working sets change very frequently".to_string());
        }
    }
    Advice {
        strategy,
        summary: strategy.describe(),
        reasons,
        matched,
        against,
        attributes: attrs,
        scores,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measures(tl: f64, idc: f64, seq: f64, pd: f64, top20: f64, reads: f64) -> Measures {
        Measures {
            requests: 100,
            temporal_locality: Some(tl),
            index_of_dispersion: Some(idc),
            sequential_fraction: Some(seq),
            partial_determinism: Some(pd),
            top20_access_share: Some(top20),
            read_fraction: Some(reads),
        }
    }

    #[test]
    fn table_rows_pick_their_strategy() {
        // Shifting working set, bursty, random, repeating, skewed: the BORG row, 5 of 5.
        let a = advise(&measures(0.2, 5.0, 0.1, 0.6, 0.6, 0.3));
        assert_eq!(a.strategy, Strategy::DynamicBorg);
        assert_eq!(a.scores[0], (Strategy::DynamicBorg, 5));
        // Same but a stable working set: dynamic layout for static access.
        let a = advise(&measures(0.9, 5.0, 0.1, 0.6, 0.6, 0.3));
        assert_eq!(a.strategy, Strategy::DynamicForStaticAccess);
        // Streaming: sequential, nothing repeats, uniform, steady arrivals. Legacy scores
        // 3; BORG: tl low +1, bursts -1, seq -1, pd -1, skew -1 = -3.
        let a = advise(&measures(0.2, 1.0, 0.9, 0.05, 0.2, 0.9));
        assert_eq!(a.strategy, Strategy::LegacySequential);
        assert_eq!(a.scores[4], (Strategy::LegacySequential, 3));
        // Read-mostly, uniform, random but repeating, steady: static tree layout scores 4.
        let a = advise(&measures(0.9, 1.0, 0.1, 0.6, 0.25, 0.95));
        assert_eq!(a.strategy, Strategy::StaticTree);
        assert!(a
            .reasons
            .iter()
            .any(|r| r.starts_with("partial_determinism = 0.600")));
    }

    #[test]
    fn ties_go_to_the_strategy_with_fewer_contradictions() {
        // Stable, bursty, mostly sequential (0.57), little repetition (0.14), skewed (0.47),
        // read-mostly. Dynamic-for-static: +1 +1 -1 -1 +1 = 1 with 2 against; legacy:
        // seq +1, pd +1, skew -1 = 1 with 1 against -> legacy.
        let a = advise(&measures(0.72, 4546.0, 0.57, 0.14, 0.47, 0.98));
        assert_eq!(a.scores[1], (Strategy::DynamicForStaticAccess, 1));
        assert_eq!(a.scores[4], (Strategy::LegacySequential, 1));
        assert_eq!(a.strategy, Strategy::LegacySequential);
        assert_eq!(a.matched, vec!["sequentiality", "partial_determinism"]);
        assert_eq!(a.against, vec!["non_uniform_frequency"]);
    }

    #[test]
    fn unknown_everything_keeps_legacy() {
        let a = advise(&Measures::default());
        assert_eq!(a.strategy, Strategy::LegacySequential);
        assert_eq!(a.reasons, vec!["the trace holds no requests".to_string()]);
    }
}
