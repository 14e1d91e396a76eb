//! Parsing and printing sizes, durations and interval rules for the command line.

use crate::working_set::Interval;

/// Parses a byte count: a plain number of bytes, or a number with a binary suffix
/// K/KiB, M/MiB, G/GiB, T/TiB (powers of 1024; case-insensitive, "KB" = "KiB").
pub fn parse_size_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "'{s}': unknown size suffix '{other}' (use bytes or K, M, G, T)"
            ))
        }
    };
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (e.g. 8589934592, 8G, 512MiB)"))?;
    let bytes = value * mult as f64;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(format!("'{s}': size must be at least 1 byte"));
    }
    Ok(bytes.round() as u64)
}

/// Parses an interval rule: a duration with suffix ms, s, m, h or d (`1d`, `1h`, `30m`),
/// or a plain N meaning every N requests.
pub fn parse_interval(s: &str) -> Result<Interval, String> {
    let t = s.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
        let n: u64 = t.parse().map_err(|_| format!("'{s}': too large"))?;
        if n == 0 {
            return Err("interval of 0 requests".to_string());
        }
        return Ok(Interval::Requests { n });
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit_ns: u64 = match unit {
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => {
            return Err(format!(
                "'{s}' is not an interval: use N (requests) or a duration like 1d, 1h, 30m, 10s"
            ))
        }
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}': missing the number before '{unit}'"))?;
    match n.checked_mul(unit_ns) {
        Some(0) => Err(format!("'{s}': interval must be longer than 0")),
        Some(ns) => Ok(Interval::Duration { ns }),
        None => Err(format!("'{s}': interval too long")),
    }
}

/// Parses a duration with suffix ms, s, m, h or d (`100ms`, `1s`).
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    match parse_interval(s)? {
        Interval::Duration { ns } => Ok(ns),
        _ => Err(format!(
            "'{s}' is not a duration: add a unit (ms, s, m, h, d)"
        )),
    }
}

/// A duration in the largest unit that keeps it readable: `1.50 s`, `250 ms`, `2.0 h`.
pub fn format_ns(ns: u64) -> String {
    let f = ns as f64;
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{:.1} us", f / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} ms", f / 1e6),
        1_000_000_000..=119_999_999_999 => format!("{:.2} s", f / 1e9),
        120_000_000_000..=7_199_999_999_999 => format!("{:.1} min", f / 60e9),
        7_200_000_000_000..=172_799_999_999_999 => format!("{:.1} h", f / 3600e9),
        _ => format!("{:.1} d", f / 86400e9),
    }
}

/// Bytes in binary units: `512 B`, `4.0 KiB`, `1.5 GiB`.
pub fn format_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", UNITS[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size_bytes("4096"), Ok(4096));
        assert_eq!(parse_size_bytes("8G"), Ok(8 << 30));
        assert_eq!(parse_size_bytes("8GiB"), Ok(8 << 30));
        assert_eq!(parse_size_bytes("1.5k"), Ok(1536));
        assert!(parse_size_bytes("8X").unwrap_err().contains("suffix"));
        assert!(parse_size_bytes("0").is_err());
        assert!(parse_size_bytes("G").is_err());
    }

    #[test]
    fn intervals() {
        assert_eq!(
            parse_interval("1d"),
            Ok(Interval::Duration {
                ns: 86_400_000_000_000
            })
        );
        assert_eq!(
            parse_interval("30m"),
            Ok(Interval::Duration {
                ns: 1_800_000_000_000
            })
        );
        assert_eq!(parse_interval("1000"), Ok(Interval::Requests { n: 1000 }));
        assert!(parse_interval("0").is_err());
        assert!(parse_interval("5y").is_err());
        assert!(parse_interval("h").is_err());
        assert_eq!(parse_duration_ns("100ms"), Ok(100_000_000));
        assert!(parse_duration_ns("100").is_err());
    }

    #[test]
    fn printing() {
        assert_eq!(format_ns(1_500_000_000), "1.50 s");
        assert_eq!(format_ns(250_000_000), "250.0 ms");
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(3 << 30), "3.0 GiB");
    }
}
