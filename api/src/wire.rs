//! How request bodies read JSON where serde's defaults differ from what the OpenAPI document
//! (JSON Schema) says: an object is only an object, `2.0` is an integer, and a field given as
//! `null` is a field given.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Error, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A struct read from a JSON object only. serde's derive also builds a struct from an array
/// of its field values (`[[1]]` as `{"payload": [1]}`), which the document does not allow.
pub struct ObjectOnly<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectOnly<T> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Object<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for Object<T> {
            type Value = T;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }

        de.deserialize_map(Object(PhantomData)).map(ObjectOnly)
    }
}

/// A required (or defaulted) object field (see `ObjectOnly`).
pub fn object<'de, D, T>(de: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    ObjectOnly::<T>::deserialize(de).map(|ObjectOnly(t)| t)
}

/// A list of objects (see `ObjectOnly`).
pub fn objects<'de, D, T>(de: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let items = Vec::<ObjectOnly<T>>::deserialize(de)?;
    Ok(items.into_iter().map(|ObjectOnly(t)| t).collect())
}

/// An optional object (see `ObjectOnly`).
pub fn optional_object<'de, D, T>(de: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<ObjectOnly<T>>::deserialize(de)?.map(|ObjectOnly(t)| t))
}

/// An integer as JSON Schema counts them: `3`, and also `3.0` or `3e2` (a number with no
/// fraction), which some JSON encoders write. Out of range or fractional is an error.
struct Integral<T>(T);

impl<'de, T: TryFrom<i128>> Deserialize<'de> for Integral<T> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let number = serde_json::Number::deserialize(de)?;
        let wide = if let Some(i) = number.as_i64() {
            i128::from(i)
        } else if let Some(u) = number.as_u64() {
            i128::from(u)
        } else {
            let f = number.as_f64().unwrap_or(f64::NAN);
            // Beyond ±2^100 no target type fits anyway; below it the cast is exact.
            if !f.is_finite() || f.fract() != 0.0 || f.abs() > 2f64.powi(100) {
                return Err(D::Error::custom(format!(
                    "invalid value: {number}, expected a whole number"
                )));
            }
            f as i128
        };
        T::try_from(wide).map(Integral).map_err(|_| {
            D::Error::custom(format!(
                "invalid value: {number} is out of range for this field"
            ))
        })
    }
}

/// A required (or defaulted) integer field.
pub fn integer<'de, D, T>(de: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    Integral::<T>::deserialize(de).map(|Integral(v)| v)
}

/// An optional integer field; `null` is absent.
pub fn optional_integer<'de, D, T>(de: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    Ok(Option::<Integral<T>>::deserialize(de)?.map(|Integral(v)| v))
}

/// A patch field whose explicit `null` clears it: present (maybe as `null`) becomes `Some(..)`.
/// serde's default would fold `null` into "absent", and then a client could never clear an
/// override.
pub fn nullable_integer<'de, D, T>(de: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    optional_integer(de).map(Some)
}

/// A patch field holding an object: absent is unchanged, `null` clears it.
pub fn nullable_object<'de, D, T>(de: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    optional_object(de).map(Some)
}

/// A patch field that cannot be cleared: `null` is refused rather than read as "unchanged",
/// so every field present in a patch changes something.
pub fn present_bool<'de, D>(de: D) -> Result<Option<bool>, D::Error>
where
    D: Deserializer<'de>,
{
    bool::deserialize(de).map(Some)
}

/// A JSON value field whose explicit `null` still counts as given (a `null` payload).
pub fn present_value<'de, D>(de: D) -> Result<Option<Value>, D::Error>
where
    D: Deserializer<'de>,
{
    Value::deserialize(de).map(Some)
}
