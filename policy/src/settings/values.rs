//! The values of settings, as text (a flag, a variable, a string in a
//! policy file) or as a policy file's integer: counts, sizes and
//! durations, each checked one way whatever its source.

use std::time::Duration;

/// A count (`max-sockets`, ...): a whole number in `1..=u32::MAX`.
pub(crate) fn count(value: Value<'_>) -> Result<u32, String> {
    let n = match value {
        Value::Integer(n) => n,
        Value::Text(text) => whole_number(text, "64")?,
    };
    let n = at_least_one(n, u64::from(u32::MAX), "")?;
    // `at_least_one` bounded it by u32::MAX.
    u32::try_from(n).map_err(|_| format!("too large: at most {}", u32::MAX))
}

/// A size in bytes: a policy file's integer, or text such as `512MiB`.
pub(crate) fn size(value: Value<'_>) -> Result<u64, String> {
    match value {
        Value::Integer(n) => at_least_one(n, u64::MAX, " byte"),
        Value::Text(text) if text.trim().is_empty() => Err("needs a value".to_owned()),
        Value::Text(text) => parse_size(text),
    }
}

/// A duration: a policy file's integer seconds, or text such as `30s`.
pub(crate) fn duration(value: Value<'_>) -> Result<Duration, String> {
    match value {
        Value::Integer(n) => at_least_one(n, u64::MAX, " second").map(Duration::from_secs),
        Value::Text(text) if text.trim().is_empty() => Err("needs a value".to_owned()),
        Value::Text(text) => parse_duration(text),
    }
}

/// A setting's value as its source wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// Text: a flag's value, a variable, a policy file's string or one
    /// entry of its list.
    Text(&'a str),
    /// A policy file's integer (saturated to `i128`'s range): a count, a
    /// size in bytes or a duration in seconds.
    Integer(i128),
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(text: &'a str) -> Value<'a> {
        Value::Text(text)
    }
}

/// Text that must be a whole number; `example` goes in the message.
fn whole_number(text: &str, example: &str) -> Result<i128, String> {
    let text = text.trim();
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(if text.is_empty() {
            "needs a value".to_owned()
        } else {
            format!("expected a whole number such as {example}, found {text:?}")
        });
    }
    // Too many digits for an i128: as large (or as small) as it gets.
    Ok(text.parse::<i128>().unwrap_or(if text.starts_with('-') {
        i128::MIN
    } else {
        i128::MAX
    }))
}

/// Checks `n` against `1..=max`; `unit` names the unit in messages.
fn at_least_one(n: i128, max: u64, unit: &str) -> Result<u64, String> {
    if n < 1 {
        return Err(if n > i128::from(i64::MIN) {
            format!("must be at least 1{unit}, found {n}")
        } else {
            format!("must be at least 1{unit}")
        });
    }
    u64::try_from(n)
        .ok()
        .filter(|&n| n <= max)
        .ok_or_else(|| format!("too large: at most {max}"))
}

/// Splits "<digits><unit>" (one space allowed between) into the number and the unit.
fn number_and_unit<'s>(s: &'s str, example: &str) -> Result<(u64, &'s str), String> {
    let s = s.trim();
    if s.starts_with('-') {
        return Err(format!("must not be negative, found {s:?}"));
    }
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, rest) = s.split_at(digits_end);
    if digits.is_empty() {
        return Err(format!(
            "expected a number followed by a unit, such as {example:?}, found {s:?}"
        ));
    }
    if rest.starts_with('.') {
        return Err(format!(
            "{s:?}: whole numbers only; for a fraction use a smaller unit"
        ));
    }
    let number = digits
        .parse::<u64>()
        .map_err(|_| format!("{s:?}: the number is too large"))?;
    Ok((number, rest.trim_start()))
}

/// Parses a size string: a whole number and exactly one of B, KiB, MiB, GiB.
pub fn parse_size(s: &str) -> Result<u64, String> {
    const UNITS: &str = "B, KiB, MiB or GiB";
    let (number, unit) = number_and_unit(s, "512MiB")?;
    let multiplier: u64 = match unit {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "" => {
            return Err(format!("{s:?} has no unit: add one of {UNITS}"));
        }
        _ => return Err(size_unit_hint(s, unit, UNITS)),
    };
    let bytes = number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("{s:?} is too large: at most {} bytes", u64::MAX))?;
    if bytes == 0 {
        return Err(format!("must be at least 1 byte, found {s:?}"));
    }
    Ok(bytes)
}

/// Explains a size unit that is not accepted, pointing at the binary unit meant.
fn size_unit_hint(s: &str, unit: &str, units: &str) -> String {
    let binary = match unit.to_ascii_lowercase().as_str() {
        "b" | "byte" | "bytes" => Some("B"),
        "k" | "kb" | "kib" => Some("KiB"),
        "m" | "mb" | "mib" => Some("MiB"),
        "g" | "gb" | "gib" => Some("GiB"),
        _ => None,
    };
    match binary {
        // Decimal (KB = 1000) and binary (KiB = 1024) readings of `KB` differ;
        // only the unambiguous binary spelling is accepted.
        Some(binary) => format!("{s:?}: unit `{unit}` is not accepted: write `{binary}`"),
        None => format!("{s:?}: unknown unit `{unit}`: expected {units}"),
    }
}

/// Parses a duration string: a whole number and exactly one of ms, s, m, h.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    const UNITS: &str = "ms, s, m or h";
    let (number, unit) = number_and_unit(s, "30s")?;
    let too_large = || format!("{s:?} is too long");
    let duration = match unit {
        "ms" => Duration::from_millis(number),
        "s" => Duration::from_secs(number),
        "m" => Duration::from_secs(number.checked_mul(60).ok_or_else(too_large)?),
        "h" => Duration::from_secs(number.checked_mul(3600).ok_or_else(too_large)?),
        "" => {
            return Err(format!("{s:?} has no unit: add one of {UNITS}"));
        }
        _ => return Err(duration_unit_hint(s, unit, UNITS)),
    };
    if duration.is_zero() {
        return Err(format!("must be longer than 0, found {s:?}"));
    }
    Ok(duration)
}

/// Explains a duration unit that is not accepted, pointing at the accepted spelling.
fn duration_unit_hint(s: &str, unit: &str, units: &str) -> String {
    let advice = match unit.to_ascii_lowercase().as_str() {
        "ms" | "msec" | "msecs" | "millis" | "millisecond" | "milliseconds" => "write `ms`",
        "s" | "sec" | "secs" | "second" | "seconds" => "write `s`",
        "m" | "min" | "mins" | "minute" | "minutes" => "write `m`",
        "h" | "hr" | "hrs" | "hour" | "hours" => "write `h`",
        "d" | "day" | "days" => "write hours, e.g. \"24h\" for a day",
        "us" | "µs" | "ns" => "the smallest unit is `ms`",
        _ => return format!("{s:?}: unknown unit `{unit}`: expected {units}"),
    };
    format!("{s:?}: unit `{unit}` is not accepted: {advice}")
}
