//! The admission rule shared by `evaluate` and `serve` (docs/layout.md "Admission"):
//! three layouts compete for the next phase — the new plan, the layout in place, and
//! every page home — each judged by its predicted busy time on the device model plus
//! the busy time of the copies that reach it. The least total wins; a tie keeps what is
//! in place, so a move must save more than it costs.

use serde::{Deserialize, Serialize};

/// The layout a reconfiguration leaves in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Choice {
    /// The new plan, copies and all.
    Plan,
    /// The layout already in place; nothing is copied.
    Keep,
    /// Every page home: the plain layout.
    Home,
}

/// The admission rule's inputs and decision: predicted busy seconds of the next phase on
/// each candidate layout, and the busy seconds of the copies that reach it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Admission {
    pub choice: Choice,
    pub predicted_plan_busy_s: f64,
    pub predicted_keep_busy_s: f64,
    pub predicted_plain_busy_s: f64,
    pub plan_copy_busy_s: f64,
    pub home_copy_busy_s: f64,
}

impl Admission {
    /// The candidate with the least predicted busy time plus copy time; on a tie what is
    /// in place stays (a move must save more than it costs).
    pub fn choose(&self) -> Choice {
        let keep = self.predicted_keep_busy_s;
        let plan = self.predicted_plan_busy_s + self.plan_copy_busy_s;
        let home = self.predicted_plain_busy_s + self.home_copy_busy_s;
        if plan < keep && plan <= home {
            Choice::Plan
        } else if home < keep {
            Choice::Home
        } else {
            Choice::Keep
        }
    }

    /// These predictions with the rule's decision filled in.
    pub fn decided(self) -> Admission {
        Admission {
            choice: self.choose(),
            ..self
        }
    }

    /// Why the rule chose as it did, in words for `status` and logs.
    pub fn reason(&self) -> String {
        let keep = self.predicted_keep_busy_s;
        let plan = self.predicted_plan_busy_s + self.plan_copy_busy_s;
        let home = self.predicted_plain_busy_s + self.home_copy_busy_s;
        let what = match self.choice {
            Choice::Plan => "the new plan pays for its copies",
            Choice::Keep => "no move saves more than it costs",
            Choice::Home => "the plain layout beats the one in place, copies included",
        };
        format!(
            "{what}: plan {plan:.3} s ({:.3} s busy + {:.3} s copies), keep {keep:.3} s, \
             home {home:.3} s ({:.3} s busy + {:.3} s copies)",
            self.predicted_plan_busy_s,
            self.plan_copy_busy_s,
            self.predicted_plain_busy_s,
            self.home_copy_busy_s
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(plan: f64, plan_copy: f64, keep: f64, plain: f64, home_copy: f64) -> Admission {
        Admission {
            choice: Choice::Keep,
            predicted_plan_busy_s: plan,
            predicted_keep_busy_s: keep,
            predicted_plain_busy_s: plain,
            plan_copy_busy_s: plan_copy,
            home_copy_busy_s: home_copy,
        }
    }

    #[test]
    fn a_move_must_save_more_than_it_costs() {
        assert_eq!(a(5.0, 1.0, 7.0, 9.0, 0.0).choose(), Choice::Plan);
        // Saves 2 s, copies cost 2 s: a tie keeps.
        assert_eq!(a(5.0, 2.0, 7.0, 9.0, 0.0).choose(), Choice::Keep);
        assert_eq!(a(5.0, 3.0, 7.0, 6.0, 0.5).choose(), Choice::Home);
        let d = a(5.0, 1.0, 7.0, 9.0, 0.0).decided();
        assert_eq!(d.choice, Choice::Plan);
        assert!(d.reason().contains("pays"), "{}", d.reason());
    }
}
