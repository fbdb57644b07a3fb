//! Whether serializing a value would give exactly a given JSON tree, checked without building it.
//!
//! Every write is normalised through its kind's typed model (`schema::prune`: decode, encode
//! again), and nearly every object that arrives is already in that form — a client sends back
//! what it read with a field or two changed. Encoding the typed object into a new
//! `serde_json::Value` allocates the whole tree again only to find it equal to the one in hand.
//! [`same`] walks the typed object's serialization alongside the tree instead and stops at the
//! first difference; the caller keeps the tree it has when there is none.
//!
//! "Exactly" is stricter than `Value`'s `==`: object keys must come in the same order (a stored
//! document's key order is the model's), and numbers must have the same representation (`1` and
//! `1.0` differ), as `serde_json::to_value` would write them. Forms a typed model seldom
//! produces (bytes, 128-bit integers, enum variants with data) count as different, which only
//! sends the caller down the full path.

use serde::Serialize;
use serde::ser::{self, Impossible};
use serde_json::{Number, Value};

/// Whether `serde_json::to_value(v)` would be exactly `want` (same keys in the same order, same
/// number representations). A serialization error counts as different.
pub fn same<T: Serialize + ?Sized>(v: &T, want: &Value) -> bool {
    v.serialize(SameAs(want)).is_ok()
}

/// The one error: the serialization differs from the tree (or could not be compared).
#[derive(Debug)]
pub struct Differs;

impl std::fmt::Display for Differs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the serialization differs")
    }
}

impl std::error::Error for Differs {}

impl ser::Error for Differs {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Differs
    }
}

type R = Result<(), Differs>;

fn check(ok: bool) -> R {
    if ok { Ok(()) } else { Err(Differs) }
}

/// Serializer methods for integers, each compared as the number `to_value` writes.
macro_rules! integers {
    ($($method:ident($t:ty)),*) => {$(
        fn $method(self, v: $t) -> R {
            self.number(Some(v.into()))
        }
    )*};
}

/// Serializer methods for values that never match.
macro_rules! differ {
    ($($method:ident($t:ty)),*) => {$(
        fn $method(self, _: $t) -> R {
            Err(Differs)
        }
    )*};
}

/// The enum variants with data, which never match (a typed model writes none).
macro_rules! variants_differ {
    () => {
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, Differs> {
            Err(Differs)
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, Differs> {
            Err(Differs)
        }
    };
}

/// A serializer that compares what it is given with the tree it holds.
struct SameAs<'a>(&'a Value);

impl SameAs<'_> {
    fn number(&self, n: Option<Number>) -> R {
        match (self.0, n) {
            (Value::Number(have), Some(n)) => check(*have == n),
            // `to_value` writes a non-finite float as null.
            (Value::Null, None) => Ok(()),
            _ => Err(Differs),
        }
    }

    fn string(&self, s: &str) -> R {
        check(matches!(self.0, Value::String(have) if have == s))
    }
}

impl<'a> ser::Serializer for SameAs<'a> {
    type Ok = ();
    type Error = Differs;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Impossible<(), Differs>;
    type SerializeMap = Fields<'a>;
    type SerializeStruct = Fields<'a>;
    type SerializeStructVariant = Impossible<(), Differs>;

    fn serialize_bool(self, v: bool) -> R {
        check(self.0 == &Value::Bool(v))
    }
    integers!(
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64)
    );
    fn serialize_i128(self, _: i128) -> R {
        Err(Differs)
    }
    fn serialize_u128(self, _: u128) -> R {
        Err(Differs)
    }
    fn serialize_f32(self, v: f32) -> R {
        self.number(Number::from_f64(f64::from(v)))
    }
    fn serialize_f64(self, v: f64) -> R {
        self.number(Number::from_f64(v))
    }
    fn serialize_char(self, v: char) -> R {
        self.string(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> R {
        self.string(v)
    }
    fn serialize_bytes(self, _: &[u8]) -> R {
        Err(Differs)
    }
    fn serialize_none(self) -> R {
        check(self.0.is_null())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> R {
        v.serialize(self)
    }
    fn serialize_unit(self) -> R {
        check(self.0.is_null())
    }
    fn serialize_unit_struct(self, _: &'static str) -> R {
        check(self.0.is_null())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> R {
        self.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> R {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> R {
        Err(Differs)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Seq<'a>, Differs> {
        match self.0 {
            Value::Array(items) if len.is_none_or(|n| n == items.len()) => Ok(Seq {
                items: items.iter(),
            }),
            _ => Err(Differs),
        }
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>, Differs> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq<'a>, Differs> {
        self.serialize_seq(Some(len))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Fields<'a>, Differs> {
        match self.0 {
            Value::Object(m) => Ok(Fields {
                fields: m.iter(),
                value: None,
            }),
            _ => Err(Differs),
        }
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Fields<'a>, Differs> {
        self.serialize_map(None)
    }
    variants_differ!();
}

/// A sequence compared item by item; it must end where the array does.
struct Seq<'a> {
    items: std::slice::Iter<'a, Value>,
}

impl Seq<'_> {
    fn item<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        v.serialize(SameAs(self.items.next().ok_or(Differs)?))
    }
    fn finish(self) -> R {
        check(self.items.len() == 0)
    }
}

/// The three sequence traits, each the same walk under its own method name.
macro_rules! seq_like {
    ($($tr:ident :: $method:ident),*) => {$(
        impl ser::$tr for Seq<'_> {
            type Ok = ();
            type Error = Differs;
            fn $method<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
                self.item(v)
            }
            fn end(self) -> R {
                self.finish()
            }
        }
    )*};
}

seq_like!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field
);

/// An object compared entry by entry in order; it must end where the object does.
struct Fields<'a> {
    fields: serde_json::map::Iter<'a>,
    /// The value of the entry whose key matched, waiting for `serialize_value`.
    value: Option<&'a Value>,
}

impl<'a> Fields<'a> {
    /// The next entry, which must have key `key`.
    fn next_key(&mut self, key: &str) -> Result<&'a Value, Differs> {
        match self.fields.next() {
            Some((k, v)) if k == key => Ok(v),
            _ => Err(Differs),
        }
    }
}

impl ser::SerializeMap for Fields<'_> {
    type Ok = ();
    type Error = Differs;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> R {
        let (k, v) = self.fields.next().ok_or(Differs)?;
        key.serialize(KeyIs(k))?;
        self.value = Some(v);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        v.serialize(SameAs(self.value.take().ok_or(Differs)?))
    }
    fn end(self) -> R {
        check(self.fields.len() == 0 && self.value.is_none())
    }
}

impl ser::SerializeStruct for Fields<'_> {
    type Ok = ();
    type Error = Differs;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> R {
        v.serialize(SameAs(self.next_key(key)?))
    }
    fn end(self) -> R {
        check(self.fields.len() == 0)
    }
}

/// Whether a map key is the string `to_value` would write it as: only string keys are compared
/// (anything else differs).
struct KeyIs<'a>(&'a str);

impl ser::Serializer for KeyIs<'_> {
    type Ok = ();
    type Error = Differs;
    type SerializeSeq = Impossible<Self::Ok, Differs>;
    type SerializeTuple = Impossible<Self::Ok, Differs>;
    type SerializeTupleStruct = Impossible<Self::Ok, Differs>;
    type SerializeTupleVariant = Impossible<Self::Ok, Differs>;
    type SerializeMap = Impossible<Self::Ok, Differs>;
    type SerializeStruct = Impossible<Self::Ok, Differs>;
    type SerializeStructVariant = Impossible<Self::Ok, Differs>;

    fn serialize_str(self, v: &str) -> R {
        check(self.0 == v)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> R {
        check(self.0 == variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<Self::Ok, Differs> {
        v.serialize(self)
    }
    differ!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_bytes(&[u8])
    );
    fn serialize_none(self) -> Result<Self::Ok, Differs> {
        Err(Differs)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<Self::Ok, Differs> {
        Err(Differs)
    }
    fn serialize_unit(self) -> Result<Self::Ok, Differs> {
        Err(Differs)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Self::Ok, Differs> {
        Err(Differs)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<Self::Ok, Differs> {
        Err(Differs)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Differs> {
        Err(Differs)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Differs> {
        Err(Differs)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Differs> {
        Err(Differs)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Differs> {
        Err(Differs)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Differs> {
        Err(Differs)
    }
    variants_differ!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    /// Exactly equal: `==` and the same serialized text (which holds key order and number
    /// representation).
    fn exactly(a: &Value, b: &Value) -> bool {
        a == b && serde_json::to_string(a).ok() == serde_json::to_string(b).ok()
    }

    #[test]
    fn same_is_exact_equality_of_the_serialization() {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {"b": "1", "a": "2"}, "generation": 3},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "100m"}}, "ports": [{"containerPort": 80}]}],
                "terminationGracePeriodSeconds": 30},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap();
        let model = serde_json::to_value(&pod).unwrap();
        assert!(same(&pod, &model));
        // Each way a tree can differ from the model's: a value, a missing or extra key, key
        // order, a number's representation, an array's length, a type.
        let mut variants: Vec<Value> = Vec::new();
        let mut v = model.clone();
        v["metadata"]["name"] = json!("q");
        variants.push(v);
        let mut v = model.clone();
        v["metadata"].as_object_mut().unwrap().remove("labels");
        variants.push(v);
        let mut v = model.clone();
        v["metadata"]["extra"] = json!("x");
        variants.push(v);
        let mut v = model.clone();
        v["metadata"]["generation"] = json!(3.0);
        variants.push(v);
        let mut v = model.clone();
        v["spec"]["terminationGracePeriodSeconds"] = json!(-30);
        variants.push(v);
        let mut v = model.clone();
        v["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({}));
        variants.push(v);
        let mut v = model.clone();
        v["status"]["conditions"] = json!([]);
        variants.push(v);
        let mut v = model.clone();
        v["status"]["phase"] = json!(null);
        variants.push(v);
        let mut v = model.clone();
        v["spec"] = json!("spec");
        variants.push(v);
        // The same entries in another order: `==` holds, the serialization differs.
        let meta = model["metadata"].as_object().unwrap();
        let mut reordered = Map::new();
        for (k, v) in meta.iter().rev() {
            reordered.insert(k.clone(), v.clone());
        }
        let mut v = model.clone();
        v["metadata"] = Value::Object(reordered);
        variants.push(v);
        for v in variants {
            assert_eq!(same(&pod, &v), exactly(&model, &v), "{v}");
            assert!(!same(&pod, &v), "{v}");
        }
    }

    #[test]
    fn plain_values_compare_as_to_value_writes_them() {
        let cases: Vec<Value> = vec![
            json!(null),
            json!(true),
            json!(0),
            json!(-7),
            json!(u64::MAX),
            json!(1.5),
            json!(""),
            json!("caf\u{e9}"),
            json!([]),
            json!([1, "a", null, [2.5], {"k": {}}]),
            json!({}),
            json!({"z": 1, "a": [true, false], "m": {"x": null}}),
        ];
        for a in &cases {
            for b in &cases {
                assert_eq!(same(a, b), exactly(a, b), "{a} vs {b}");
            }
        }
        // Non-finite floats are written as null.
        assert!(same(&f64::NAN, &json!(null)));
        assert!(!same(&1.0f64, &json!(1)));
        assert!(same(&1.0f64, &json!(1.0)));
        assert!(same(&Some(3u8), &json!(3)));
        assert!(same(&None::<u8>, &json!(null)));
        let m: std::collections::BTreeMap<String, i32> = [("a".into(), 1), ("b".into(), 2)].into();
        assert!(same(&m, &json!({"a": 1, "b": 2})));
        assert!(!same(&m, &json!({"b": 2, "a": 1})));
        assert!(!same(&m, &json!({"a": 1})));
        assert!(!same(&m, &json!({"a": 1, "b": 2, "c": 3})));
    }
}
