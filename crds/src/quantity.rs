//! Byte sizes written as Kubernetes quantities (`64Mi`, `100M`, `1.5Gi`, or a plain integer), as
//! `spec.chunkBytes` takes them. Kubernetes stores a quantity as the user wrote it, so the worker
//! and the validation parse the same text with this one function.

/// The number of bytes `text` denotes: an integer or a decimal number with an optional binary
/// (`Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`) or decimal (`k`, `M`, `G`, `T`, `P`, `E`) suffix. The
/// result must be a whole number of bytes; the error says what is wrong, for a field error.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let multiplier: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        _ => {
            return Err(format!(
                "{text:?} is not a byte size: write an integer or a quantity such as 64Mi or 100M"
            ));
        }
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty())
        || !digits_ok(whole)
        || !digits_ok(fraction)
        || fraction.len() > 9
    {
        return Err(format!(
            "{text:?} is not a byte size: write an integer or a quantity such as 64Mi or 100M"
        ));
    }
    let too_large = || format!("{text:?} is too large");
    let parse = |s: &str| -> Result<u128, String> {
        if s.is_empty() {
            Ok(0)
        } else {
            s.parse::<u128>().map_err(|_| too_large())
        }
    };
    let scale = 10u128.pow(u32::try_from(fraction.len()).map_err(|_| too_large())?);
    let scaled = parse(whole)?
        .checked_mul(scale)
        .and_then(|w| w.checked_add(parse(fraction).ok()?))
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(too_large)?;
    if scaled % scale != 0 {
        return Err(format!("{text:?} is not a whole number of bytes"));
    }
    u64::try_from(scaled / scale).map_err(|_| too_large())
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn integers_and_suffixes() {
        assert_eq!(parse_bytes("67108864"), Ok(64 << 20));
        assert_eq!(parse_bytes("64Mi"), Ok(64 << 20));
        assert_eq!(parse_bytes("1.5Gi"), Ok(3 << 29));
        assert_eq!(parse_bytes("100M"), Ok(100_000_000));
        assert_eq!(parse_bytes("8k"), Ok(8_000));
        assert_eq!(parse_bytes(" 1Ki "), Ok(1024));
        assert_eq!(parse_bytes(".5Ki"), Ok(512));
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(
            parse_bytes(crate::migration::DEFAULT_CHUNK_BYTES),
            Ok(crate::migration::DEFAULT_CHUNK_BYTES_VALUE)
        );
    }

    #[test]
    fn rejects_what_is_not_a_whole_byte_size() {
        for bad in [
            "", "Mi", "64 MiB", "64MB", "-1", "1e6", "1.5", "0.1Ki", "lots", "1.2.3Mi", "100m",
        ] {
            assert!(parse_bytes(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_bytes("16Ei").is_err_and(|e| e.contains("too large")));
    }
}
