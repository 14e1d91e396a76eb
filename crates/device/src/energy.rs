//! Power of a device: idle (spinning, electronics on), plus more while seeking and while
//! transferring (datasheet figures). Energy over a run is idle power over the whole wall
//! time plus the extra power over the time spent in each activity (FS2, seed 004, counts
//! the savings of shorter seeks this way).

use crate::params::{PowerParams, SsdPowerParams};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PowerModel {
    pub idle_w: f64,
    pub seek_w: f64,
    pub transfer_w: f64,
}

impl From<&PowerParams> for PowerModel {
    fn from(p: &PowerParams) -> Self {
        PowerModel {
            idle_w: p.idle_w,
            seek_w: p.seek_w,
            transfer_w: p.transfer_w,
        }
    }
}

impl From<&SsdPowerParams> for PowerModel {
    /// A flash device has no seek: all busy time counts at the active power.
    fn from(p: &SsdPowerParams) -> Self {
        PowerModel {
            idle_w: p.idle_w,
            seek_w: p.active_w,
            transfer_w: p.active_w,
        }
    }
}

/// Busy time per activity, accumulated by the device as it serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    pub seek_ns: u64,
    pub transfer_ns: u64,
}

impl PowerModel {
    /// Joules over `elapsed_ns` of wall time with `activity` of it busy seeking and
    /// transferring (rotational waits and overheads draw idle power: the spindle turns anyway).
    pub fn energy_j(&self, elapsed_ns: u64, activity: Activity) -> f64 {
        let s = |ns: u64| ns as f64 * 1e-9;
        self.idle_w * s(elapsed_ns)
            + (self.seek_w - self.idle_w) * s(activity.seek_ns)
            + (self.transfer_w - self.idle_w) * s(activity.transfer_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_adds_extra_power_of_each_activity() {
        let p = PowerModel {
            idle_w: 10.0,
            seek_w: 14.0,
            transfer_w: 12.0,
        };
        let a = Activity {
            seek_ns: 500_000_000,
            transfer_ns: 250_000_000,
        };
        // 10 W * 2 s + 4 W * 0.5 s + 2 W * 0.25 s = 22.5 J.
        assert!((p.energy_j(2_000_000_000, a) - 22.5).abs() < 1e-9);
    }
}
