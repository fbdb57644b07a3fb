//! API objects decoded without their `metadata.managedFields`: `Slim<K>` is `K` for every API
//! call and watch, but its decoding skips the managed fields unread.
//!
//! Upstream's kube-controller-manager and kube-scheduler drop `managedFields` from every object
//! their informers hold (a transform on the informer): only the API server uses them. Dropping
//! them after decoding still pays for decoding them, and in klab's in-process clusters that is
//! most of the cost of a pod's metadata: a running pod's managed fields are a tree of a hundred
//! or more small JSON maps, larger than the rest of the pod. `Slim<K>` reads them as
//! `IgnoredAny` and leaves `managed_fields` `None`, which is exactly what the transform leaves.
//!
//! The filter applies to the `managedFields` key of a map that is the value of a `metadata`
//! key, at any depth: in the k8s-openapi types (and in built-in kinds read as JSON values) that
//! is always an `ObjectMeta` (an object's own, a list's items', a template's). Nothing else is
//! touched.

use std::borrow::Cow;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde::{Deserialize, Serialize, Serializer};

/// `K`, decoded without `metadata.managedFields`.
#[derive(Clone, Debug)]
pub struct Slim<K>(pub K);

impl<K> Slim<K> {
    pub fn into_inner(self) -> K {
        self.0
    }
}

impl<K> std::ops::Deref for Slim<K> {
    type Target = K;
    fn deref(&self) -> &K {
        &self.0
    }
}

impl<K: Serialize> Serialize for Slim<K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de, K: Deserialize<'de>> Deserialize<'de> for Slim<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        K::deserialize(Filter {
            inner: d,
            metadata: false,
        })
        .map(Slim)
    }
}

/// The items of `kube_core::Resource` that a wrapper standing for its `K` in every API call
/// takes from `K` (all but `meta`/`meta_mut`, written beside it).
macro_rules! resource_of_inner {
    () => {
        type DynamicType = K::DynamicType;
        type Scope = K::Scope;

        fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
            K::kind(dt)
        }
        fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
            K::group(dt)
        }
        fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
            K::version(dt)
        }
        fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
            K::api_version(dt)
        }
        fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
            K::plural(dt)
        }
        fn metadata_api() -> bool {
            K::metadata_api()
        }
        fn url_path(dt: &Self::DynamicType, namespace: Option<&str>) -> String {
            K::url_path(dt, namespace)
        }
    };
}
pub(crate) use resource_of_inner;

impl<K: kube_core::Resource> kube_core::Resource for Slim<K> {
    resource_of_inner!();

    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        self.0.meta_mut()
    }
}

/// A deserializer that hands every map it yields through [`FilterMap`]; `metadata` is true for
/// the value of a `metadata` key.
struct Filter<D> {
    inner: D,
    metadata: bool,
}

/// The visitor side of [`Filter`]: wraps the maps, sequences and nested values it is handed.
struct FilterVisitor<V> {
    inner: V,
    metadata: bool,
}

/// A seed whose value is decoded through a [`Filter`].
struct FilterSeed<S> {
    inner: S,
    metadata: bool,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for FilterSeed<S> {
    type Value = S::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Filter {
            inner: d,
            metadata: self.metadata,
        })
    }
}

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            let visitor = FilterVisitor { inner: visitor, metadata: self.metadata };
            self.inner.$method($($arg,)* visitor)
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Filter<D> {
    type Error = D::Error;

    forward_deserialize!(
        deserialize_any(),
        deserialize_bool(),
        deserialize_i8(),
        deserialize_i16(),
        deserialize_i32(),
        deserialize_i64(),
        deserialize_i128(),
        deserialize_u8(),
        deserialize_u16(),
        deserialize_u32(),
        deserialize_u64(),
        deserialize_u128(),
        deserialize_f32(),
        deserialize_f64(),
        deserialize_char(),
        deserialize_str(),
        deserialize_string(),
        deserialize_bytes(),
        deserialize_byte_buf(),
        deserialize_option(),
        deserialize_unit(),
        deserialize_seq(),
        deserialize_map(),
        deserialize_identifier(),
        deserialize_ignored_any(),
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_struct(name: &'static str, fields: &'static [&'static str]),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
    );

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.inner.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for FilterVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit!(
        visit_bool(bool),
        visit_i8(i8),
        visit_i16(i16),
        visit_i32(i32),
        visit_i64(i64),
        visit_i128(i128),
        visit_u8(u8),
        visit_u16(u16),
        visit_u32(u32),
        visit_u64(u64),
        visit_u128(u128),
        visit_f32(f32),
        visit_f64(f64),
        visit_char(char),
        visit_str(&str),
        visit_borrowed_str(&'de str),
        visit_string(String),
        visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]),
        visit_byte_buf(Vec<u8>),
    );

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Filter {
            inner: d,
            metadata: self.metadata,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Filter {
            inner: d,
            metadata: self.metadata,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(FilterSeq { inner: seq })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(FilterMap {
            inner: map,
            metadata: self.metadata,
            value_is_metadata: false,
        })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        // No k8s-openapi enum carries object metadata in its data.
        self.inner.visit_enum(data)
    }
}

struct FilterSeq<A> {
    inner: A,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for FilterSeq<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.inner.next_element_seed(FilterSeed {
            inner: seed,
            metadata: false,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// A map's entries, less `managedFields` when the map is an object's metadata.
struct FilterMap<A> {
    inner: A,
    /// This map is the value of a `metadata` key.
    metadata: bool,
    /// The key just handed out was `metadata`.
    value_is_metadata: bool,
}

/// A map key, borrowed from the input when the input allows.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key<'de>, D::Error> {
        d.deserialize_str(KeySeed)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key::Borrowed(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key::Owned(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
        Ok(Key::Owned(v))
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FilterMap<A> {
    type Error = A::Error;

    fn next_key_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        loop {
            let Some(key) = self.inner.next_key_seed(KeySeed)? else {
                return Ok(None);
            };
            if self.metadata && key.as_str() == "managedFields" {
                self.inner.next_value::<IgnoredAny>()?;
                continue;
            }
            self.value_is_metadata = key.as_str() == "metadata";
            return match key {
                Key::Borrowed(s) => seed
                    .deserialize(de::value::BorrowedStrDeserializer::<A::Error>::new(s))
                    .map(Some),
                Key::Owned(s) => seed
                    .deserialize(de::value::StringDeserializer::<A::Error>::new(s))
                    .map(Some),
            };
        }
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.inner.next_value_seed(FilterSeed {
            inner: seed,
            metadata: std::mem::take(&mut self.value_is_metadata),
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests;
