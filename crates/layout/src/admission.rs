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
    /// How many phases the chosen layout is expected to serve, later ones discounted
    /// ([`Admission::horizon`]): the predicted busy times are per phase, the copies are
    /// paid once.
    #[serde(default = "one_phase")]
    pub horizon_phases: f64,
}

fn one_phase() -> f64 {
    1.0
}

impl Admission {
    /// A layout stays until a later plan replaces it, so its saving recurs every phase;
    /// but a prediction from one backtest phase says less the further ahead it looks, so
    /// each later phase counts half the one before, and at most three count (a horizon
    /// of 1, 1.5 or 1.75 phases). With one phase, the start-up capture's plan (5.5 s
    /// predicted saving per phase, then 2.1 s for the second day's additions) waited
    /// until the third boundary.
    pub const MAX_HORIZON_PHASES: u32 = 3;

    /// Only a predicted saving of at least this share of the phase is trusted beyond the
    /// next phase. A backtest replay cannot tell smaller savings from noise: plans
    /// predicted to save 3-8% of a phase, counted over the horizon, paid for copies that
    /// never came back (fiu borg 1.030, windows-mssql borg 1.037, wdev_3 dlr-frag 1.045
    /// of vanilla's total); the start-up capture's plans are predicted to save 31-56%.
    pub const SIGNIFICANT_SAVING: f64 = 0.10;

    /// The horizon of a layout installed with `phases_left` normal phases to go.
    pub fn horizon(phases_left: u64) -> f64 {
        let n = phases_left.clamp(1, u64::from(Self::MAX_HORIZON_PHASES)) as i32;
        (0..n).map(|k| 0.5f64.powi(k)).sum()
    }

    /// Each candidate's total relative to keeping the layout in place over the horizon:
    /// (plan, home); negative is a saving. A candidate predicted to save less than
    /// [`Self::SIGNIFICANT_SAVING`] over keeping counts one phase only.
    fn relative_totals(&self) -> (f64, f64) {
        let keep1 = self.predicted_keep_busy_s;
        let over_horizon = |busy: f64| {
            let h = if keep1 - busy >= Self::SIGNIFICANT_SAVING * keep1 {
                self.horizon_phases
            } else {
                1.0
            };
            (busy - keep1) * h
        };
        (
            over_horizon(self.predicted_plan_busy_s) + self.plan_copy_busy_s,
            over_horizon(self.predicted_plain_busy_s) + self.home_copy_busy_s,
        )
    }

    /// The candidate with the least predicted busy time over the horizon plus copy time;
    /// on a tie what is in place stays (a move must save more than it costs).
    pub fn choose(&self) -> Choice {
        let (plan, home) = self.relative_totals();
        if plan < 0.0 && plan <= home {
            Choice::Plan
        } else if home < 0.0 {
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
        let (plan_vs_keep, home_vs_keep) = self.relative_totals();
        let what = match self.choice {
            Choice::Plan => "the new plan pays for its copies",
            Choice::Keep => "no move saves more than it costs",
            Choice::Home => "the plain layout beats the one in place, copies included",
        };
        format!(
            "{what}: over {:.2} phases against keeping ({:.3} s a phase), the plan \
             {plan_vs_keep:+.3} s ({:.3} s busy + {:.3} s copies), home {home_vs_keep:+.3} s \
             ({:.3} s busy + {:.3} s copies)",
            self.horizon_phases,
            self.predicted_keep_busy_s,
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
            horizon_phases: 1.0,
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
