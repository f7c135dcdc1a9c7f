//! Value shapes that read well in a TOML file and in an environment variable alike.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};

/// Durations as strings with a unit: `"250ms"`, `"1s"`, `"15m"`, `"1h 30m"`.
pub mod duration {
    use std::time::Duration;

    use serde::de::{self, Deserializer, Visitor};
    use serde::ser::Serializer;

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&humantime::format_duration(*value).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        deserializer.deserialize_any(DurationVisitor)
    }

    struct DurationVisitor;

    const EXPECTED: &str =
        "a duration with a unit, such as \"250ms\", \"1s\", \"15m\" or \"1h 30m\"";

    impl Visitor<'_> for DurationVisitor {
        type Value = Duration;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(EXPECTED)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
            humantime::parse_duration(v.trim())
                .map_err(|e| E::custom(format!("{v:?} is not {EXPECTED} ({e})")))
        }

        // A bare number is ambiguous (seconds? milliseconds?): refuse it with the fix.
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
            Err(E::custom(format!(
                "{v} has no unit; write {EXPECTED} (for example \"{v}s\")"
            )))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
            Err(E::custom(format!(
                "{v} has no unit; write {EXPECTED} (for example \"{v}s\")"
            )))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
            Err(E::custom(format!("{v} has no unit; write {EXPECTED}")))
        }
    }
}

/// A list of names given either as a list (`["a", "b"]`, TOML) or comma-separated
/// (`a,b`, environment and flags). Empty entries are dropped.
pub fn list_or_csv<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<String>>, D::Error> {
    struct ListVisitor;

    impl<'de> Visitor<'de> for ListVisitor {
        type Value = Option<Vec<String>>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of names or a comma-separated string")
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(ListVisitor)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(split_csv(v)))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element::<String>()? {
                out.extend(split_csv(&item));
            }
            Ok(Some(out))
        }
    }

    deserializer.deserialize_any(ListVisitor)
}

pub fn split_csv(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}
