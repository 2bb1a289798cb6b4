//! Java's hashing, as Kafka's mappings use it (a group's or transactional
//! id's coordinator partition, a partition's replica fetcher): clients and
//! tools compute the same mappings, so these must match Java bit for bit.

/// Java's `String.hashCode()`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16
/// code units, in wrapping 32-bit arithmetic.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Kafka's `Utils.abs`: like `Math.abs`, except that `i32::MIN` maps to 0
/// instead of staying negative.
pub fn kafka_abs(n: i32) -> i32 {
    if n == i32::MIN {
        0
    } else {
        n.abs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Java formula written out independently: the polynomial in i64,
    /// reduced to a two's-complement i32 the way Java's `int` overflows.
    fn java_formula(s: &str) -> i32 {
        let mut h: i64 = 0;
        for unit in s.encode_utf16() {
            h = (h * 31 + i64::from(unit)).rem_euclid(1 << 32);
        }
        h as u32 as i32
    }

    #[test]
    fn matches_known_java_hash_codes() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("foo"), 101_574);
        // Overflows wrap as in Java.
        assert_eq!(java_string_hash("replicated-topic"), -887_126_723);
        assert_eq!(java_string_hash("Aa"), java_string_hash("BB"));
        // The classic string whose hashCode is Integer.MIN_VALUE.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // Non-BMP characters count as two UTF-16 units.
        assert_eq!(java_string_hash("😀"), java_formula("😀"));
        assert_eq!(
            java_string_hash("console-consumer-1"),
            java_formula("console-consumer-1")
        );
    }

    #[test]
    fn kafka_abs_maps_min_value_to_zero() {
        assert_eq!(kafka_abs(i32::MIN), 0);
        assert_eq!(kafka_abs(-7), 7);
    }
}
