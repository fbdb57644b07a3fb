//! JSON values decoded with some of their fields left out: a [`Shape`] says, key by key, which
//! values of an object to skip (stepped over by the parser, never built), which to build whole,
//! and which to shape further.
//!
//! Building a `serde_json::Value` is most of the cost of decoding one, and many readers use a
//! few fields of large objects: a Table row reads a pod without its managed fields (the API
//! server's `json_field::decode_without`), the sim recorder reads a pod's status and a few of
//! its spec's fields. Both decode through this one visitor.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// What of a value to build.
pub trait Shape: Sized {
    /// What of the value under `key` of an object to build: `None` skips it, `Some(None)`
    /// builds it whole, `Some(Some(shape))` builds it as `shape` says.
    fn field(&self, key: &str) -> Option<Option<Self>>;

    /// What of each element of an array to build (`None`: each whole).
    fn element(&self) -> Option<Self>;
}

/// A value decoded as `shape` says (a `DeserializeSeed`).
pub struct Shaped<S>(pub S);

impl<'de, S: Shape> DeserializeSeed<'de> for Shaped<S> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// A value built whole (`None`), or as a shape says.
struct Either<S>(Option<S>);

impl<'de, S: Shape> DeserializeSeed<'de> for Either<S> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        match self.0 {
            Some(shape) => Shaped(shape).deserialize(d),
            None => Value::deserialize(d),
        }
    }
}

impl<'de, S: Shape> Visitor<'de> for Shaped<S> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        // A size hint is the input's claim: trust it only so far.
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        if self.0.element().is_none() {
            while let Some(v) = seq.next_element::<Value>()? {
                items.push(v);
            }
        } else {
            while let Some(v) = seq.next_element_seed(Either(self.0.element()))? {
                items.push(v);
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(Key)? {
            match self.0.field(&key) {
                None => {
                    map.next_value::<IgnoredAny>()?;
                    // A later duplicate of a skipped key is skipped too; an earlier one goes.
                    out.shift_remove(key.as_ref());
                }
                Some(shape) => {
                    let v = map.next_value_seed(Either(shape))?;
                    out.insert(key.into_owned(), v);
                }
            }
        }
        Ok(Value::Object(out))
    }
}

/// An object's key, borrowed from the input when it can be (a skipped key is not allocated).
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Skips keys named `x` at every depth, and builds the elements of arrays under `l` with
    /// the same rule (elsewhere arrays are built whole).
    #[derive(Clone, Copy)]
    struct NoX {
        in_l: bool,
    }

    impl Shape for NoX {
        fn field(&self, key: &str) -> Option<Option<Self>> {
            match key {
                "x" => None,
                "l" => Some(Some(NoX { in_l: true })),
                _ => Some(Some(NoX { in_l: false })),
            }
        }
        fn element(&self) -> Option<Self> {
            self.in_l.then_some(*self)
        }
    }

    fn decode(text: &str) -> Value {
        let mut d = serde_json::Deserializer::from_str(text);
        let v = Shaped(NoX { in_l: false }).deserialize(&mut d).unwrap();
        d.end().unwrap();
        v
    }

    #[test]
    fn skipped_keys_are_left_out_and_everything_else_is_as_serde_json_builds_it() {
        let text = r#"{"a": 1, "x": {"big": [1, 2]}, "b": {"x": 2, "c": [true, null, -1.5, "s"]},
            "l": [{"x": 1, "y": 2}, 3], "m": [{"x": 1}], "e": "\u00e9\n", "k\"q": 18446744073709551615}"#;
        assert_eq!(
            decode(text),
            json!({"a": 1, "b": {"c": [true, null, -1.5, "s"]}, "l": [{"y": 2}, 3],
                "m": [{"x": 1}], "e": "é\n", "k\"q": 18446744073709551615u64})
        );
        // A later duplicate of a skipped key is skipped too.
        assert_eq!(decode(r#"{"x": 1, "a": 2, "x": 3}"#), json!({"a": 2}));
        // Not JSON: the parser's error.
        let mut d = serde_json::Deserializer::from_str(r#"{"a": }"#);
        assert!(Shaped(NoX { in_l: false }).deserialize(&mut d).is_err());
    }
}
