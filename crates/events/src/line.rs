//! One NDJSON line: the event's own derived `Serialize`, with the envelope (`seq`, `ts`,
//! `run_id`, `task_id`) spliced in right after its `type` tag, written straight into a
//! reused buffer. No `Value` or `Map` is built per line: a 10,000-task run writes tens of
//! thousands of lines, and building a map for each was most of its allocations.
//!
//! The splice relies on one property of serde's internally tagged enums: the tag is the
//! first field written. The tests below pin it for every event type.

use std::fmt::Display;

use humantime::Rfc3339Timestamp;
use schemars::JsonSchema;
use serde::ser::{self, Impossible, Serialize, SerializeMap, SerializeStruct, Serializer};

use super::Event;

/// The fields every line carries after `type` (contract §3). Its `JsonSchema` is the
/// envelope part of `deerflow schema`.
#[derive(JsonSchema)]
pub struct Stamp<'a> {
    /// 0, 1, 2, … without gaps.
    pub seq: u64,
    /// RFC 3339, UTC, milliseconds.
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub ts: Rfc3339Timestamp,
    pub run_id: &'a str,
    /// The sub-agent the event happened in; absent for the lead's events.
    #[schemars(with = "String")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<&'a str>,
}

impl<'a> Stamp<'a> {
    /// A stamp with the current time.
    pub fn now(seq: u64, run_id: &'a str, task_id: Option<&'a str>) -> Self {
        Stamp {
            seq,
            ts: humantime::format_rfc3339_millis(std::time::SystemTime::now()),
            run_id,
            task_id,
        }
    }
}

/// Writes the envelope fields with `$put(key, &value)` in their fixed order.
macro_rules! put_envelope {
    ($stamp:expr, $put:expr) => {{
        let s = $stamp;
        $put("seq", &s.seq)?;
        $put("ts", &AsString(&s.ts))?;
        $put("run_id", s.run_id)?;
        if let Some(t) = s.task_id {
            $put("task_id", t)?;
        }
    }};
}

/// Serializes `event` as one line (newline included) into `buf`, which is cleared first.
pub fn write_line(buf: &mut Vec<u8>, event: &Event, stamp: &Stamp<'_>) -> serde_json::Result<()> {
    buf.clear();
    append_line(buf, event, stamp)
}

/// Serializes `event` as one line (newline included) at the end of `buf`.
pub fn append_line(buf: &mut Vec<u8>, event: &Event, stamp: &Stamp<'_>) -> serde_json::Result<()> {
    event.serialize(Stamped {
        inner: &mut serde_json::Serializer::new(&mut *buf),
        stamp,
    })?;
    buf.push(b'\n');
    Ok(())
}

/// One line as a string, stamped now (tests and tools that want a single line).
pub fn stamp(env: &super::Envelope, seq: u64, run_id: &str) -> String {
    let mut buf = Vec::new();
    let stamp = Stamp::now(seq, run_id, env.task_id.as_deref());
    // Serializing an event cannot fail: every key is a string and serde_json writes
    // non-finite floats as null.
    let _ = write_line(&mut buf, &env.event, &stamp);
    String::from_utf8_lossy(&buf).into_owned()
}

/// A `Display` value written as a JSON string without an intermediate `String`.
struct AsString<'a, T>(&'a T);

impl<T: Display> Serialize for AsString<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self.0)
    }
}

/// Forwards an event's serialization to `inner`, adding the envelope after the tag. An
/// event is always an object (a struct, or a map when it has a flattened field), so every
/// other shape is an error.
struct Stamped<'s, S> {
    inner: S,
    stamp: &'s Stamp<'s>,
}

/// The object being written; `stamped` once the envelope follows the tag.
struct WithStamp<'s, S> {
    inner: S,
    stamp: &'s Stamp<'s>,
    stamped: bool,
}

const ENVELOPE_FIELDS: usize = 4;

fn not_an_object<E: ser::Error>() -> E {
    E::custom("an event serializes as a JSON object")
}

impl<'s, S: SerializeStruct> SerializeStruct for WithStamp<'s, S> {
    type Ok = S::Ok;
    type Error = S::Error;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), S::Error> {
        if !self.stamped {
            self.inner.serialize_field(key, value)?;
            self.stamped = true;
            let inner = &mut self.inner;
            put_envelope!(self.stamp, |k, v| inner.serialize_field(k, v));
            return Ok(());
        }
        // A task's own events inside its sub-agent name the task twice; the line has one
        // `task_id`, where the envelope puts it.
        if key == "task_id" && self.stamp.task_id.is_some() {
            return Ok(());
        }
        self.inner.serialize_field(key, value)
    }

    fn end(self) -> Result<S::Ok, S::Error> {
        self.inner.end()
    }
}

impl<'s, S: SerializeMap> SerializeMap for WithStamp<'s, S> {
    type Ok = S::Ok;
    type Error = S::Error;

    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), S::Error> {
        self.inner.serialize_key(key)
    }

    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), S::Error> {
        self.inner.serialize_value(value)?;
        if !self.stamped {
            self.stamped = true;
            let inner = &mut self.inner;
            put_envelope!(self.stamp, |k, v| inner.serialize_entry(k, v));
        }
        Ok(())
    }

    fn end(self) -> Result<S::Ok, S::Error> {
        self.inner.end()
    }
}

type Never<S> = Impossible<<S as Serializer>::Ok, <S as Serializer>::Error>;

impl<'s, S: Serializer> Serializer for Stamped<'s, S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeStruct = WithStamp<'s, S::SerializeStruct>;
    type SerializeMap = WithStamp<'s, S::SerializeMap>;
    type SerializeSeq = Never<S>;
    type SerializeTuple = Never<S>;
    type SerializeTupleStruct = Never<S>;
    type SerializeTupleVariant = Never<S>;
    type SerializeStructVariant = Never<S>;

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        Ok(WithStamp {
            inner: self.inner.serialize_struct(name, len + ENVELOPE_FIELDS)?,
            stamp: self.stamp,
            stamped: false,
        })
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        Ok(WithStamp {
            inner: self.inner.serialize_map(len.map(|n| n + ENVELOPE_FIELDS))?,
            stamp: self.stamp,
            stamped: false,
        })
    }

    fn serialize_bool(self, _: bool) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_i8(self, _: i8) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_i16(self, _: i16) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_i32(self, _: i32) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_i64(self, _: i64) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_u8(self, _: u8) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_u16(self, _: u16) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_u32(self, _: u32) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_u64(self, _: u64) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_f32(self, _: f32) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_f64(self, _: f64) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_char(self, _: char) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_str(self, _: &str) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        Err(not_an_object())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, S::Error> {
        Err(not_an_object())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        Err(not_an_object())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        Err(not_an_object())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        Err(not_an_object())
    }
}
