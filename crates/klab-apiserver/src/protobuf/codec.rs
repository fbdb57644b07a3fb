//! The generic protobuf ↔ JSON codec: one walk over the message table (`messages.txt`, generated
//! from upstream's generated.proto field numbers and k8s-openapi's JSON names) converts any
//! Kubernetes message, so no kind has a codec of its own.
//!
//! Kubernetes' special types are converted as upstream's Go types marshal them: `Time` is
//! `{seconds, nanos}` on the wire and RFC 3339 to the second in JSON (a zero `Time` is an empty
//! message and `null` in JSON), `MicroTime` keeps microseconds, `Quantity` is a string,
//! `IntOrString` is `{type, intVal, strVal}`, `RawExtension` and `FieldsV1` carry JSON bytes,
//! byte fields are base64 strings and int64 stays a JSON number.
//!
//! Go's marshaller writes every non-pointer scalar, set or not, while JSON omits the zero ones
//! (`omitempty`). Decoding therefore drops zero scalars except where the JSON schema requires the
//! field or the table marks zero as meaningful (a pointer such as `replicas` or
//! `terminationGracePeriodSeconds`, where an explicit 0 differs from unset).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use base64::Engine as _;
use serde_json::{Map, Number, Value};

const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
const DURATION: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Duration";
const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";

/// Nesting beyond this is refused rather than followed (a crafted body must not exhaust the
/// stack); the deepest real object (a pod template's affinity terms) is well under 20.
const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    String,
    Bool,
    Int32,
    Int64,
    Double,
    Bytes,
    Message,
    MapString,
    MapBytes,
    MapMessage,
}

#[derive(Debug, Clone)]
pub struct Field {
    pub number: u32,
    pub json: String,
    pub kind: Kind,
    /// The message type of a message field or a map's message values.
    pub target: String,
    pub repeated: bool,
    pub required: bool,
    pub keep_zero: bool,
    /// A Go struct embedded `json:",inline"`: its own message on the wire, its fields written
    /// into the parent's JSON object.
    pub inline: bool,
}

#[derive(Debug, Default)]
pub struct Message {
    /// In field-number order (the order Go's marshaller writes them).
    pub fields: Vec<Field>,
}

impl Message {
    fn by_number(&self, n: u32) -> Option<&Field> {
        // `fields` is sorted by number once the table is parsed.
        self.fields
            .binary_search_by_key(&n, |f| f.number)
            .ok()
            .and_then(|i| self.fields.get(i))
    }

    /// A Go "castrepeated" wrapper (`Verbs`, `ExtraValue`): one repeated string `items` that JSON
    /// writes as a bare array.
    fn is_string_list(&self) -> bool {
        matches!(self.fields.as_slice(), [f] if f.json == "items" && f.kind == Kind::String && f.repeated)
    }
}

/// Every known message by full proto name.
pub struct Table {
    pub messages: BTreeMap<String, Message>,
}

static TABLE: OnceLock<Table> = OnceLock::new();

/// The message table, parsed once.
pub fn table() -> &'static Table {
    TABLE.get_or_init(|| parse_table(include_str!("messages.txt")))
}

fn parse_table(text: &str) -> Table {
    let mut messages: BTreeMap<String, Message> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        match parts.next() {
            Some("M") => {
                let name = parts.next().unwrap_or_default().to_string();
                messages.entry(name.clone()).or_default();
                current = Some(name);
            }
            Some("F") => {
                let (Some(msg), Some(number), Some(json), Some(kind)) = (
                    current.as_ref(),
                    parts.next().and_then(|n| n.parse::<u32>().ok()),
                    parts.next(),
                    parts.next(),
                ) else {
                    continue;
                };
                let kind = match kind {
                    "string" => Kind::String,
                    "bool" => Kind::Bool,
                    "int32" => Kind::Int32,
                    "int64" => Kind::Int64,
                    "double" => Kind::Double,
                    "bytes" => Kind::Bytes,
                    "message" => Kind::Message,
                    "map-string" => Kind::MapString,
                    "map-bytes" => Kind::MapBytes,
                    "map-message" => Kind::MapMessage,
                    _ => continue,
                };
                let rest: Vec<&str> = parts.collect();
                let (target, flags) = match kind {
                    Kind::Message | Kind::MapMessage => (
                        rest.first().copied().unwrap_or_default(),
                        rest.get(1).copied().unwrap_or_default(),
                    ),
                    _ => ("", rest.first().copied().unwrap_or_default()),
                };
                if let Some(m) = messages.get_mut(msg) {
                    m.fields.push(Field {
                        number,
                        json: json.to_string(),
                        kind,
                        target: target.to_string(),
                        repeated: flags.contains('r'),
                        required: flags.contains('q'),
                        keep_zero: flags.contains('z'),
                        inline: flags.contains('i'),
                    });
                }
            }
            _ => {}
        }
    }
    for m in messages.values_mut() {
        m.fields.sort_by_key(|f| f.number);
    }
    Table { messages }
}

// ---------------------------------------------------------------------------------------------
// Wire primitives

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_key(out: &mut Vec<u8>, number: u32, wire: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire));
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, number: u32, b: &[u8]) {
    put_key(out, number, 2);
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A cursor over one message's bytes.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// One decoded field value as it appears on the wire.
pub(crate) enum Raw<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    /// No Kubernetes message has a 32-bit fixed field; one is skipped like an unknown field.
    Fixed32,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v: u64 = 0;
        for shift in (0..70).step_by(7) {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or("proto: unexpected end of data in a varint")?;
            self.pos = self.pos.saturating_add(1);
            if shift == 63 && b > 1 {
                return Err("proto: integer overflow in a varint".into());
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err("proto: integer overflow in a varint".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or("proto: unexpected end of data")?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// The next `(field number, value)`, or `None` at the end of the message.
    pub(crate) fn next_field(&mut self) -> Result<Option<(u32, Raw<'a>)>, String> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| "proto: illegal field number")?;
        if number == 0 {
            return Err("proto: illegal tag 0".into());
        }
        let raw = match key & 7 {
            0 => Raw::Varint(self.varint()?),
            1 => {
                let b = self.take(8)?;
                Raw::Fixed64(u64::from_le_bytes(
                    b.try_into().map_err(|_| "proto: short")?,
                ))
            }
            2 => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| "proto: negative length found during unmarshaling")?;
                Raw::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Raw::Fixed32
            }
            w => return Err(format!("proto: illegal wireType {w}")),
        };
        Ok(Some((number, raw)))
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding: protobuf → JSON

fn wrong_wire(msg: &str, f: &Field) -> String {
    format!(
        "proto: wrong wireType for field {} of {}",
        f.json,
        short_name(msg)
    )
}

fn short_name(msg: &str) -> &str {
    msg.rsplit('.').next().unwrap_or(msg)
}

/// Decodes `bytes` as the message `msg` into its JSON form. `None` is a value JSON writes as
/// absent (a zero `Time`).
pub fn decode(msg: &str, bytes: &[u8]) -> Result<Option<Value>, String> {
    decode_at(msg, bytes, 0)
}

fn decode_at(msg: &str, bytes: &[u8], depth: usize) -> Result<Option<Value>, String> {
    if depth > MAX_DEPTH {
        return Err("proto: message nested too deeply".into());
    }
    if let Some(v) = decode_special(msg, bytes, depth)? {
        return Ok(v);
    }
    let m = table()
        .messages
        .get(msg)
        .ok_or_else(|| format!("no protobuf message {msg} is known"))?;
    if m.is_string_list() {
        let mut items = Vec::new();
        let mut r = Reader::new(bytes);
        while let Some((_, raw)) = r.next_field()? {
            if let Raw::Bytes(b) = raw {
                items.push(Value::String(utf8(b)?));
            }
        }
        return Ok(Some(Value::Array(items)));
    }
    // Values per field: scalars and messages keep the last, repeated fields collect.
    let mut singles: BTreeMap<u32, Option<Value>> = BTreeMap::new();
    let mut lists: BTreeMap<u32, Vec<Value>> = BTreeMap::new();
    let mut maps: BTreeMap<u32, Map<String, Value>> = BTreeMap::new();
    let mut r = Reader::new(bytes);
    while let Some((number, raw)) = r.next_field()? {
        let Some(f) = m.by_number(number) else {
            continue; // a field newer than the table: skipped, as Go skips unknown fields
        };
        match f.kind {
            Kind::MapString | Kind::MapBytes | Kind::MapMessage => {
                let Raw::Bytes(entry) = raw else {
                    return Err(wrong_wire(msg, f));
                };
                let (k, v) = decode_map_entry(f, entry, depth)?;
                maps.entry(number).or_default().insert(k, v);
            }
            _ if f.repeated => {
                let list = lists.entry(number).or_default();
                match (f.kind, raw) {
                    // A packed run of scalars.
                    (Kind::Int32 | Kind::Int64 | Kind::Bool, Raw::Bytes(b)) => {
                        let mut pr = Reader::new(b);
                        while pr.pos < b.len() {
                            let v = pr.varint()?;
                            list.push(scalar_from_varint(f.kind, v));
                        }
                    }
                    (Kind::Double, Raw::Bytes(b)) => {
                        for c in b.chunks(8) {
                            let arr: [u8; 8] = c.try_into().map_err(|_| wrong_wire(msg, f))?;
                            list.push(double(f64::from_bits(u64::from_le_bytes(arr))));
                        }
                    }
                    (_, raw) => {
                        if let Some(v) = decode_value(msg, f, raw, depth)? {
                            list.push(v);
                        }
                    }
                }
            }
            _ => {
                let v = decode_value(msg, f, raw, depth)?;
                singles.insert(number, v);
            }
        }
    }
    let mut out = Map::new();
    for f in &m.fields {
        if let Some(list) = lists.remove(&f.number) {
            out.insert(f.json.clone(), Value::Array(list));
        } else if let Some(map) = maps.remove(&f.number) {
            out.insert(f.json.clone(), Value::Object(map));
        } else if let Some(v) = singles.remove(&f.number) {
            match v {
                Some(Value::Object(fields)) if f.inline => out.extend(fields),
                // Only scalars: a special message's zero (`maxSurge: 0`, a "0" Quantity) is
                // written by Go's JSON too.
                Some(v)
                    if f.kind != Kind::Message
                        && is_zero_scalar(&v)
                        && !f.required
                        && !f.keep_zero => {}
                Some(v) => {
                    out.insert(f.json.clone(), v);
                }
                None => {}
            }
        }
    }
    Ok(Some(Value::Object(out)))
}

fn is_zero_scalar(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0) || n.as_f64() == Some(0.0),
        _ => false,
    }
}

fn utf8(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "proto: invalid UTF-8 in a string field".into())
}

fn double(f: f64) -> Value {
    Number::from_f64(f)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

fn scalar_from_varint(kind: Kind, v: u64) -> Value {
    match kind {
        Kind::Bool => Value::Bool(v != 0),
        // int32 travels sign-extended to 64 bits; the low 32 bits are the value.
        Kind::Int32 => Value::from(v as u32 as i32),
        _ => Value::from(v as i64),
    }
}

fn decode_value(msg: &str, f: &Field, raw: Raw<'_>, depth: usize) -> Result<Option<Value>, String> {
    Ok(Some(match (f.kind, raw) {
        (Kind::String, Raw::Bytes(b)) => Value::String(utf8(b)?),
        (Kind::Bytes, Raw::Bytes(b)) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(b))
        }
        (Kind::Int32 | Kind::Int64 | Kind::Bool, Raw::Varint(v)) => scalar_from_varint(f.kind, v),
        (Kind::Double, Raw::Fixed64(v)) => double(f64::from_bits(v)),
        (Kind::Message, Raw::Bytes(b)) => return decode_at(&f.target, b, depth.saturating_add(1)),
        _ => return Err(wrong_wire(msg, f)),
    }))
}

fn decode_map_entry(f: &Field, entry: &[u8], depth: usize) -> Result<(String, Value), String> {
    let mut key = String::new();
    let mut value: Option<Value> = None;
    let mut r = Reader::new(entry);
    while let Some((n, raw)) = r.next_field()? {
        match (n, raw) {
            (1, Raw::Bytes(b)) => key = utf8(b)?,
            (2, Raw::Bytes(b)) => {
                value = match f.kind {
                    Kind::MapString => Some(Value::String(utf8(b)?)),
                    Kind::MapBytes => Some(Value::String(
                        base64::engine::general_purpose::STANDARD.encode(b),
                    )),
                    _ => decode_at(&f.target, b, depth.saturating_add(1))?,
                }
            }
            _ => return Err(format!("proto: bad map entry in field {}", f.json)),
        }
    }
    let value = match (value, f.kind) {
        (Some(v), _) => v,
        (None, Kind::MapMessage) => {
            decode_at(&f.target, &[], depth.saturating_add(1))?.unwrap_or(Value::Null)
        }
        (None, _) => Value::String(String::new()),
    };
    Ok((key, value))
}

/// Fields of a small message as `number → raw`, last one winning.
fn fields_of(bytes: &[u8]) -> Result<BTreeMap<u32, Raw<'_>>, String> {
    let mut out = BTreeMap::new();
    let mut r = Reader::new(bytes);
    while let Some((n, raw)) = r.next_field()? {
        out.insert(n, raw);
    }
    Ok(out)
}

fn varint_of(fields: &BTreeMap<u32, Raw<'_>>, n: u32) -> i64 {
    match fields.get(&n) {
        Some(Raw::Varint(v)) => *v as i64,
        _ => 0,
    }
}

fn bytes_of<'a>(fields: &BTreeMap<u32, Raw<'a>>, n: u32) -> &'a [u8] {
    match fields.get(&n) {
        Some(Raw::Bytes(b)) => b,
        _ => &[],
    }
}

/// The special types; `Ok(None)` for an ordinary message.
#[allow(clippy::type_complexity)]
fn decode_special(msg: &str, bytes: &[u8], depth: usize) -> Result<Option<Option<Value>>, String> {
    Ok(Some(match msg {
        TIME | MICRO_TIME => {
            if bytes.is_empty() {
                return Ok(Some(None));
            }
            let f = fields_of(bytes)?;
            let secs = varint_of(&f, 1);
            let nanos = varint_of(&f, 2) as u32 as i32;
            let t = jiff::Timestamp::new(secs, if msg == TIME { 0 } else { nanos })
                .map_err(|e| format!("proto: time out of range: {e}"))?;
            Some(Value::String(if msg == TIME {
                klab_api::clock::format_time(t)
            } else {
                klab_api::clock::format_micro_time(t)
            }))
        }
        DURATION => {
            let f = fields_of(bytes)?;
            let nanos = varint_of(&f, 1);
            let d = std::time::Duration::from_nanos(nanos.unsigned_abs());
            let s = klab_api::duration::format_go_duration(d);
            Some(Value::String(if nanos < 0 { format!("-{s}") } else { s }))
        }
        QUANTITY => Some(Value::String(utf8(bytes_of(&fields_of(bytes)?, 1))?)),
        INT_OR_STRING => {
            let f = fields_of(bytes)?;
            Some(if varint_of(&f, 1) == 1 {
                Value::String(utf8(bytes_of(&f, 3))?)
            } else {
                Value::from(varint_of(&f, 2) as u32 as i32)
            })
        }
        RAW_EXTENSION | FIELDS_V1 => {
            let raw = bytes_of(&fields_of(bytes)?, 1);
            if raw.is_empty() {
                return Ok(Some(None));
            }
            Some(embedded(raw, depth)?)
        }
        _ => return Ok(None),
    }))
}

/// The object inside a `RawExtension`: JSON, or a protobuf envelope of its own.
fn embedded(raw: &[u8], depth: usize) -> Result<Value, String> {
    if raw.starts_with(super::MAGIC) {
        let (api_version, kind, obj) = super::decode_envelope_at(raw, depth.saturating_add(1))?;
        let mut obj = obj;
        if let Some(o) = obj.as_object_mut() {
            o.insert("apiVersion".into(), Value::String(api_version));
            o.insert("kind".into(), Value::String(kind));
        }
        return Ok(obj);
    }
    serde_json::from_slice(raw).map_err(|e| format!("embedded object: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Encoding: JSON → protobuf

/// Encodes the JSON object `v` as the message `msg`.
pub fn encode(msg: &str, v: &Value) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    encode_into(msg, v, &mut out, 0)?;
    Ok(out)
}

fn type_error(f: &Field, v: &Value) -> String {
    format!(
        "cannot encode {} as field {} ({:?})",
        match v {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        },
        f.json,
        f.kind
    )
}

fn encode_into(msg: &str, v: &Value, out: &mut Vec<u8>, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err("object nested too deeply".into());
    }
    if encode_special(msg, v, out)? {
        return Ok(());
    }
    let m = table()
        .messages
        .get(msg)
        .ok_or_else(|| format!("no protobuf message {msg} is known"))?;
    if m.is_string_list() {
        for item in v.as_array().map(Vec::as_slice).unwrap_or_default() {
            put_bytes(out, 1, item.as_str().unwrap_or_default().as_bytes());
        }
        return Ok(());
    }
    let Some(obj) = v.as_object() else {
        return Err(format!("{} must be an object", short_name(msg)));
    };
    for f in &m.fields {
        if f.inline {
            // The embedded struct reads its fields from this same JSON object.
            encode_value(f, v, out, depth)?;
            continue;
        }
        let Some(fv) = obj.get(&f.json) else {
            continue;
        };
        if fv.is_null() {
            continue;
        }
        match f.kind {
            Kind::MapString | Kind::MapBytes | Kind::MapMessage => {
                let Some(map) = fv.as_object() else {
                    return Err(type_error(f, fv));
                };
                // Go writes map entries in key order.
                let sorted: BTreeMap<&String, &Value> = map.iter().collect();
                for (k, mv) in sorted {
                    let mut entry = Vec::new();
                    put_bytes(&mut entry, 1, k.as_bytes());
                    match f.kind {
                        Kind::MapString => {
                            put_bytes(&mut entry, 2, mv.as_str().unwrap_or_default().as_bytes())
                        }
                        Kind::MapBytes => put_bytes(&mut entry, 2, &base64_value(f, mv)?),
                        _ => {
                            let mut inner = Vec::new();
                            encode_into(&f.target, mv, &mut inner, depth.saturating_add(1))?;
                            put_bytes(&mut entry, 2, &inner);
                        }
                    }
                    put_bytes(out, f.number, &entry);
                }
            }
            _ if f.repeated => {
                let Some(items) = fv.as_array() else {
                    return Err(type_error(f, fv));
                };
                for item in items {
                    encode_value(f, item, out, depth)?;
                }
            }
            _ => encode_value(f, fv, out, depth)?,
        }
    }
    Ok(())
}

fn base64_value(f: &Field, v: &Value) -> Result<Vec<u8>, String> {
    let s = v.as_str().ok_or_else(|| type_error(f, v))?;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| format!("field {}: illegal base64 data: {e}", f.json))
}

fn int_value(f: &Field, v: &Value) -> Result<i64, String> {
    let n = v.as_i64().ok_or_else(|| type_error(f, v))?;
    if f.kind == Kind::Int32 && i32::try_from(n).is_err() {
        return Err(format!("field {}: {n} overflows int32", f.json));
    }
    Ok(n)
}

fn encode_value(f: &Field, v: &Value, out: &mut Vec<u8>, depth: usize) -> Result<(), String> {
    match f.kind {
        Kind::String => {
            let s = v.as_str().ok_or_else(|| type_error(f, v))?;
            put_bytes(out, f.number, s.as_bytes());
        }
        Kind::Bytes => put_bytes(out, f.number, &base64_value(f, v)?),
        Kind::Bool => {
            let b = v.as_bool().ok_or_else(|| type_error(f, v))?;
            put_key(out, f.number, 0);
            put_varint(out, u64::from(b));
        }
        Kind::Int32 | Kind::Int64 => {
            let n = int_value(f, v)?;
            put_key(out, f.number, 0);
            put_varint(out, n as u64);
        }
        Kind::Double => {
            let d = v.as_f64().ok_or_else(|| type_error(f, v))?;
            put_key(out, f.number, 1);
            out.extend_from_slice(&d.to_bits().to_le_bytes());
        }
        Kind::Message => {
            let mut inner = Vec::new();
            encode_into(&f.target, v, &mut inner, depth.saturating_add(1))?;
            put_bytes(out, f.number, &inner);
        }
        Kind::MapString | Kind::MapBytes | Kind::MapMessage => return Err(type_error(f, v)),
    }
    Ok(())
}

/// The special types; `false` for an ordinary message.
fn encode_special(msg: &str, v: &Value, out: &mut Vec<u8>) -> Result<bool, String> {
    match msg {
        TIME | MICRO_TIME => {
            let s = v.as_str().ok_or("a time must be an RFC 3339 string")?;
            let t: jiff::Timestamp = s.parse().map_err(|e| format!("parsing time {s:?}: {e}"))?;
            put_key(out, 1, 0);
            put_varint(out, t.as_second() as u64);
            let nanos = if msg == TIME {
                0
            } else {
                t.subsec_nanosecond()
            };
            if nanos != 0 {
                put_key(out, 2, 0);
                put_varint(out, i64::from(nanos) as u64);
            }
        }
        DURATION => {
            let s = v.as_str().ok_or("a duration must be a string")?;
            let d = klab_api::duration::parse_duration(s)?;
            put_key(out, 1, 0);
            put_varint(out, i64::try_from(d.as_nanos()).unwrap_or(i64::MAX) as u64);
        }
        QUANTITY => {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err("a quantity must be a string".into()),
            };
            put_bytes(out, 1, s.as_bytes());
        }
        INT_OR_STRING => {
            // Go writes all three fields.
            let (ty, int, text) = match v {
                Value::Number(n) => (0u64, n.as_i64().unwrap_or_default(), ""),
                Value::String(s) => (1u64, 0, s.as_str()),
                _ => return Err("an int-or-string must be a number or a string".into()),
            };
            put_key(out, 1, 0);
            put_varint(out, ty);
            put_key(out, 2, 0);
            put_varint(out, int as u64);
            put_bytes(out, 3, text.as_bytes());
        }
        RAW_EXTENSION | FIELDS_V1 => {
            let raw = serde_json::to_vec(v).map_err(|e| e.to_string())?;
            put_bytes(out, 1, &raw);
        }
        _ => return Ok(false),
    }
    Ok(true)
}
