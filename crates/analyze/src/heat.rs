//! The device heat map of seed 000 Figure 1 (middle row): the address space cut into
//! regions laid out as cells in row-major order, each shaded by one of six "normalized,
//! exponentially-increasing heat levels".
//!
//! Levels, precisely: let c be a cell's page accesses and M the largest c of any cell.
//! An untouched cell is level 0. A touched cell is at level k (1..=6), the smallest k with
//! c <= M^(k/6). The level bounds M^(1/6), M^(2/6), ..., M grow by the same factor
//! M^(1/6) each step (exponential) and are relative to the busiest cell (normalized), so
//! level 6 is the hottest sixth of the log-range and level 1 holds cells accessed about
//! as rarely as once. When M = 1 every touched cell is level 6.

use serde::Serialize;

use crate::pages::{DeviceTotals, PageKey, Pages};

pub const COLUMNS: u64 = 32;
pub const ROWS: u64 = 32;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct HeatMap {
    /// The device drawn (the one with the most page accesses).
    pub device: u32,
    pub columns: u64,
    pub rows: u64,
    /// Pages the map spans: the device's size when known, otherwise up to the highest
    /// page touched.
    pub span_pages: u64,
    pub span_is_device_size: bool,
    pub pages_per_cell: u64,
    /// Page accesses per cell, row-major.
    pub counts: Vec<u64>,
    /// Heat level 0..=6 per cell, row-major.
    pub levels: Vec<u8>,
    /// Upper bound (inclusive) of levels 1..=6: M^(k/6).
    pub level_bounds: Vec<f64>,
}

/// The level of a cell with `c` accesses when the busiest cell has `max` (see module doc).
pub fn level(c: u64, max: u64) -> u8 {
    if c == 0 {
        return 0;
    }
    if max <= 1 {
        return 6;
    }
    let x = 6.0 * (c as f64).ln() / (max as f64).ln();
    // The epsilon keeps exact powers (c == M^(k/6)) on their own level despite rounding.
    (x - 1e-9).ceil().clamp(1.0, 6.0) as u8
}

/// Builds the map for the busiest device; `device_pages` is its size in pages if known.
pub fn heat_map(pages: &Pages, device_pages: Option<u64>) -> HeatMap {
    let mut heat = HeatBuilder::new(pages.device_totals(), device_pages);
    for (k, s) in pages.iter() {
        heat.add(k, s.accesses());
    }
    heat.finish()
}

/// A heat map filled one page at a time, for the scan that also makes the page summary.
pub struct HeatBuilder {
    device: u32,
    span_pages: u64,
    span_is_device_size: bool,
    pages_per_cell: u64,
    counts: Vec<u64>,
}

impl HeatBuilder {
    /// The map of the device with the most page accesses (ties to the lower device
    /// number), spanning the device's size when known and at least its highest page,
    /// else up to its highest page.
    pub fn new(totals: &[DeviceTotals], device_pages: Option<u64>) -> Self {
        let (device, highest) = totals
            .iter()
            .max_by(|a, b| a.accesses.cmp(&b.accesses).then(b.device.cmp(&a.device)))
            .map_or((0, 0), |d| (d.device, d.end_page));
        let span_is_device_size = device_pages.is_some_and(|d| d >= highest);
        let span_pages = if span_is_device_size {
            device_pages.unwrap_or(highest)
        } else {
            highest
        };
        let cells = COLUMNS * ROWS;
        HeatBuilder {
            device,
            span_pages,
            span_is_device_size,
            pages_per_cell: span_pages.div_ceil(cells).max(1),
            counts: vec![0; cells as usize],
        }
    }

    #[inline]
    pub fn add(&mut self, page: PageKey, accesses: u64) {
        if page.device == self.device {
            let cell = (page.page / self.pages_per_cell).min(COLUMNS * ROWS - 1);
            self.counts[cell as usize] += accesses;
        }
    }

    pub fn finish(self) -> HeatMap {
        let max = self.counts.iter().copied().max().unwrap_or(0);
        HeatMap {
            device: self.device,
            columns: COLUMNS,
            rows: ROWS,
            span_pages: self.span_pages,
            span_is_device_size: self.span_is_device_size,
            pages_per_cell: self.pages_per_cell,
            levels: self.counts.iter().map(|&c| level(c, max)).collect(),
            counts: self.counts,
            level_bounds: (1..=6).map(|k| (max as f64).powf(k as f64 / 6.0)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_exponential_levels_by_hand() {
        // M = 64: bounds 64^(k/6) = 2, 4, 8, 16, 32, 64.
        let got: Vec<u8> = [0, 1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64]
            .iter()
            .map(|&c| level(c, 64))
            .collect();
        assert_eq!(got, vec![0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]);
        assert_eq!(level(1, 1), 6);
    }
}
