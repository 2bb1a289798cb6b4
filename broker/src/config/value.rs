//! Config value types, parsing and validation, following Kafka's `ConfigDef`
//! rules (numbers, booleans and strings are trimmed; lists are comma-separated
//! with blanks around elements dropped).

use std::fmt;
use std::marker::PhantomData;

/// Kafka's config types, with their DescribeConfigs type codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    String,
    Int,
    Short,
    Long,
    Double,
    List,
    Password,
}

impl ConfigType {
    /// The `ConfigType` code DescribeConfigs v3+ reports.
    pub fn kafka_code(self) -> i8 {
        match self {
            Self::Boolean => 1,
            Self::String => 2,
            Self::Int => 3,
            Self::Short => 4,
            Self::Long => 5,
            Self::Double => 6,
            Self::List => 7,
            Self::Password => 9,
        }
    }

    fn expected(self) -> &'static str {
        match self {
            Self::Boolean => "true or false",
            Self::String | Self::Password => "a string",
            Self::Int => "a 32-bit integer",
            Self::Short => "a 16-bit integer",
            Self::Long => "a 64-bit integer",
            Self::Double => "a number",
            Self::List => "a comma-separated list",
        }
    }
}

/// A parsed value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Boolean(bool),
    String(String),
    Int(i32),
    Short(i16),
    Long(i64),
    Double(f64),
    List(Vec<String>),
}

impl Value {
    /// Parses `raw` as `ty`; the error says what was expected.
    pub fn parse(ty: ConfigType, raw: &str) -> Result<Self, String> {
        let trimmed = raw.trim();
        let fail = || format!("expected {}", ty.expected());
        Ok(match ty {
            ConfigType::Boolean => match trimmed.to_ascii_lowercase().as_str() {
                "true" => Self::Boolean(true),
                "false" => Self::Boolean(false),
                _ => return Err(fail()),
            },
            ConfigType::String => Self::String(trimmed.to_owned()),
            ConfigType::Password => Self::String(raw.to_owned()),
            ConfigType::Int => Self::Int(trimmed.parse().map_err(|_| fail())?),
            ConfigType::Short => Self::Short(trimmed.parse().map_err(|_| fail())?),
            ConfigType::Long => Self::Long(trimmed.parse().map_err(|_| fail())?),
            ConfigType::Double => Self::Double(
                trimmed
                    .parse()
                    .ok()
                    .filter(|d: &f64| !d.is_nan())
                    .ok_or_else(fail)?,
            ),
            ConfigType::List => Self::List(if trimmed.is_empty() {
                Vec::new()
            } else {
                trimmed.split(',').map(|s| s.trim().to_owned()).collect()
            }),
        })
    }

    fn as_i64(&self) -> Option<i64> {
        match *self {
            Self::Int(v) => Some(v.into()),
            Self::Short(v) => Some(v.into()),
            Self::Long(v) => Some(v),
            _ => None,
        }
    }
}

/// Renders like Kafka's `ConfigDef.convertToString`, for DescribeConfigs.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Boolean(b) => write!(f, "{b}"),
            Self::String(s) => f.write_str(s),
            Self::Int(v) => write!(f, "{v}"),
            Self::Short(v) => write!(f, "{v}"),
            Self::Long(v) => write!(f, "{v}"),
            // Java's Double.toString: plain in [1e-3, 1e7), else E notation.
            Self::Double(d) if *d == 0.0 || (1e-3..1e7).contains(&d.abs()) => write!(f, "{d:?}"),
            Self::Double(d) => write!(f, "{d:E}"),
            Self::List(items) => f.write_str(&items.join(",")),
        }
    }
}

/// A value-level constraint, checked after parsing.
#[derive(Debug, Clone, Copy)]
pub enum Valid {
    Any,
    AtLeast(i64),
    Between(i64, i64),
    /// A fraction or rate bound for doubles.
    DoubleBetween(f64, f64),
    /// The string must be one of these (case-sensitive, like Kafka's ValidString).
    OneOf(&'static [&'static str]),
    /// Every list element must be one of these.
    ListOf(&'static [&'static str]),
    /// A list with at least one element.
    NonEmptyList,
    /// A string its consumer's own parser accepts.
    Parses(fn(&str) -> Result<(), String>),
}

impl Valid {
    pub fn check(self, value: &Value) -> Result<(), String> {
        match (self, value) {
            (Self::Any, _) => Ok(()),
            (Self::AtLeast(min), v) => match v.as_i64() {
                Some(n) if n < min => Err(format!("must be at least {min}")),
                _ => Ok(()),
            },
            (Self::Between(min, max), v) => match v.as_i64() {
                Some(n) if n < min || n > max => Err(format!("must be between {min} and {max}")),
                _ => Ok(()),
            },
            (Self::DoubleBetween(min, max), Value::Double(d)) if *d < min || *d > max => {
                Err(format!("must be between {min} and {max}"))
            }
            (Self::OneOf(allowed), Value::String(s)) if !allowed.contains(&s.as_str()) => {
                Err(format!("must be one of {}", allowed.join(", ")))
            }
            (Self::ListOf(allowed), Value::List(items)) => {
                match items.iter().find(|i| !allowed.contains(&i.as_str())) {
                    Some(bad) => Err(format!("'{bad}' is not one of {}", allowed.join(", "))),
                    None => Ok(()),
                }
            }
            (Self::NonEmptyList, Value::List(items)) if items.iter().all(String::is_empty) => {
                Err("must not be empty".to_owned())
            }
            (Self::Parses(parse), Value::String(s)) => parse(s),
            _ => Ok(()),
        }
    }
}

/// A typed handle on a config key; `BrokerConfig::get` returns a `T`.
#[derive(Debug)]
pub struct Key<T> {
    pub name: &'static str,
    _type: PhantomData<fn() -> T>,
}

impl<T> Key<T> {
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            _type: PhantomData,
        }
    }
}

impl<T> Clone for Key<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Key<T> {}

/// Conversion from a resolved (possibly null) value to a Rust type. A
/// mismatch is a bug in the key table, caught by its tests.
pub trait FromValue: Sized {
    fn from_value(value: Option<&Value>) -> Option<Self>;
}

macro_rules! from_value {
    ($($variant:ident => $t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(value: Option<&Value>) -> Option<Self> {
                match value {
                    Some(Value::$variant(v)) => Some(v.clone()),
                    _ => None,
                }
            }
        }
        impl FromValue for Option<$t> {
            fn from_value(value: Option<&Value>) -> Option<Self> {
                match value {
                    None => Some(None),
                    Some(Value::$variant(v)) => Some(Some(v.clone())),
                    _ => None,
                }
            }
        }
    )*};
}

from_value!(Boolean => bool, String => String, Int => i32, Short => i16, Long => i64,
    Double => f64, List => Vec<String>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_trims_and_checks_types() {
        assert_eq!(Value::parse(ConfigType::Int, " 42 "), Ok(Value::Int(42)));
        assert_eq!(
            Value::parse(ConfigType::Boolean, "TRUE"),
            Ok(Value::Boolean(true))
        );
        assert_eq!(
            Value::parse(ConfigType::List, " a , b,c "),
            Ok(Value::List(vec!["a".into(), "b".into(), "c".into()]))
        );
        assert_eq!(
            Value::parse(ConfigType::List, "  "),
            Ok(Value::List(vec![]))
        );
        assert_eq!(
            Value::parse(ConfigType::Short, "40000"),
            Err("expected a 16-bit integer".into())
        );
        assert!(Value::parse(ConfigType::Double, "NaN").is_err());
        assert_eq!(
            Value::parse(ConfigType::Password, " secret "),
            Ok(Value::String(" secret ".into()))
        );
    }

    #[test]
    fn rendering_matches_java() {
        assert_eq!(Value::Double(0.5).to_string(), "0.5");
        assert_eq!(Value::Double(1.0).to_string(), "1.0");
        assert_eq!(
            Value::Double(f64::MAX).to_string(),
            "1.7976931348623157E308"
        );
        assert_eq!(Value::List(vec!["a".into(), "b".into()]).to_string(), "a,b");
    }

    #[test]
    fn validators() {
        assert!(Valid::AtLeast(1).check(&Value::Int(0)).is_err());
        assert!(Valid::Between(1, 3).check(&Value::Long(3)).is_ok());
        assert!(Valid::OneOf(&["a"])
            .check(&Value::String("b".into()))
            .is_err());
        assert_eq!(
            Valid::ListOf(&["delete", "compact"])
                .check(&Value::List(vec!["delete".into(), "x".into()])),
            Err("'x' is not one of delete, compact".into())
        );
        assert!(Valid::NonEmptyList.check(&Value::List(vec![])).is_err());
    }
}
