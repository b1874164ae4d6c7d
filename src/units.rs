//! Human-readable sizes, durations and throughput for logs and the step summary, and the
//! durations people write (`7d`, `12h`, `1d12h`).

use std::time::Duration;

/// `1536` → `1.5 KiB`; bytes below 1 KiB are printed exactly.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `42 ms`, `1.5 s`, `2 min 5 s`, `3 h 20 min`, `3 days`, `1 day 4 h`: never a bare `0.0 s`,
/// and a long time in its largest units (two of them at most).
pub fn duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    let whole = d.as_secs();
    let (hours, days) = (whole / 3_600, whole / 86_400);
    let then = |n: u64, unit: &str| if n == 0 { String::new() } else { format!(" {n} {unit}") };
    if secs < 1.0 {
        format!("{} ms", d.as_millis())
    } else if secs < 60.0 {
        format!("{secs:.1} s")
    } else if hours == 0 {
        format!("{} min {} s", whole / 60, whole % 60)
    } else if days == 0 {
        format!("{hours} h{}", then(whole % 3_600 / 60, "min"))
    } else {
        format!("{}{}", count_of(days, "day"), then(whole % 86_400 / 3_600, "h"))
    }
}

/// Bytes per second over `d`, as `123.4 MiB/s`.
pub fn throughput(n: u64, d: Duration) -> String {
    let secs = d.as_secs_f64().max(0.001);
    format!("{}/s", bytes((n as f64 / secs) as u64))
}

/// `1234567` → `1,234,567`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `n` things, with the count as [`count`] writes it and the noun in the plural unless `n` is 1:
/// `count_of(1, "file")` → `1 file`, `count_of(1234, "entry")` → `1,234 entries`.
pub fn count_of(n: impl TryInto<u64>, noun: &str) -> String {
    let n = n.try_into().unwrap_or(u64::MAX);
    let plural = match noun.strip_suffix('y') {
        _ if n == 1 => noun.to_owned(),
        Some(stem) if !stem.ends_with(['a', 'e', 'i', 'o', 'u']) => format!("{stem}ies"),
        _ => format!("{noun}s"),
    };
    format!("{} {plural}", count(n))
}

/// The units a written duration ([`parse_span`]) may use, largest first, in seconds.
const SPAN_UNITS: [(char, u64); 5] = [('w', 7 * 86_400), ('d', 86_400), ('h', 3_600), ('m', 60), ('s', 1)];

/// A duration as people write it: one or more `<whole number><unit>` parts, the unit `w`, `d`,
/// `h`, `m` or `s` (`7d`, `12h`, `1d12h`, `90m`).
pub fn parse_span(text: &str) -> Result<Duration, String> {
    let wrong = || format!("`{text}` is not a duration: write a whole number and a unit, e.g. `7d`, `12h` or `1d12h`");
    let mut seconds = 0u64;
    let mut digits = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = SPAN_UNITS.iter().find(|(u, _)| *u == c.to_ascii_lowercase()).ok_or_else(wrong)?.1;
        let n: u64 = digits.parse().map_err(|_| wrong())?;
        seconds = n.checked_mul(unit).and_then(|s| seconds.checked_add(s)).ok_or_else(wrong)?;
        digits.clear();
    }
    if !digits.is_empty() || text.trim().is_empty() {
        return Err(wrong());
    }
    Ok(Duration::from_secs(seconds))
}

/// A duration as [`parse_span`] reads it, in its largest whole units: `7d`, `1d12h`, `0s`.
pub fn span(d: Duration) -> String {
    let mut left = d.as_secs();
    let mut out = String::new();
    for (unit, seconds) in SPAN_UNITS.iter().skip(1) {
        if left >= *seconds {
            out.push_str(&format!("{}{unit}", left / seconds));
            left %= seconds;
        }
    }
    if out.is_empty() { "0s".to_owned() } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_sizes_counts_and_rates() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 * 1024 * 1024 * 1024), "3.0 GiB");
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count_of(1usize, "file"), "1 file");
        assert_eq!(count_of(0u64, "file"), "0 files");
        assert_eq!(count_of(1234usize, "entry"), "1,234 entries");
        assert_eq!(count_of(2usize, "directory"), "2 directories");
        assert_eq!(count_of(2usize, "key"), "2 keys");
        assert_eq!(throughput(10 * 1024 * 1024, Duration::from_secs(2)), "5.0 MiB/s");
        assert_eq!(duration(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(duration(Duration::from_millis(42)), "42 ms");
        assert_eq!(duration(Duration::from_micros(300)), "0 ms");
        assert_eq!(duration(Duration::from_millis(12_340)), "12.3 s");
        assert_eq!(duration(Duration::from_secs(125)), "2 min 5 s");
        assert_eq!(duration(Duration::from_secs(3_599)), "59 min 59 s");
        assert_eq!(duration(Duration::from_secs(3_600)), "1 h");
        assert_eq!(duration(Duration::from_secs(3 * 3_600 + 20 * 60 + 59)), "3 h 20 min");
        // Three days read as days, not as 4,320 minutes or 72 hours.
        assert_eq!(duration(Duration::from_secs(3 * 86_400)), "3 days");
        assert_eq!(duration(Duration::from_secs(86_400 + 4 * 3_600 + 59)), "1 day 4 h");
        assert_eq!(duration(Duration::from_secs(u64::MAX)), "213,503,982,334,601 days 7 h");
    }

    #[test]
    fn spans_parse_as_written_and_print_back() {
        assert_eq!(parse_span("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_span("12h"), Ok(Duration::from_secs(12 * 3_600)));
        assert_eq!(parse_span(" 1d12H "), Ok(Duration::from_secs(36 * 3_600)));
        assert_eq!(parse_span("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_span("90m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_span("0s"), Ok(Duration::ZERO));
        for wrong in ["", "7", "d", "7x", "1.5d", "-1d", "99999999999999999999d"] {
            let e = parse_span(wrong).unwrap_err();
            assert!(e.contains("is not a duration") && e.contains("`7d`"), "{wrong}: {e}");
        }
        assert_eq!(span(Duration::from_secs(7 * 86_400)), "7d");
        assert_eq!(span(Duration::from_secs(36 * 3_600 + 5)), "1d12h5s");
        assert_eq!(span(Duration::ZERO), "0s");
        assert_eq!(parse_span(&span(Duration::from_secs(93_784))), Ok(Duration::from_secs(93_784)));
    }
}
