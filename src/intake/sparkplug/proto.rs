//! The Sparkplug B wire format: Eclipse Tahu's `Payload` and `Metric`, written by hand with
//! prost's derive from the published `sparkplug_b.proto` (proto2), so no `protoc` runs at build
//! time.
//!
//! Only what Galewatch reads is declared. Everything else the proto holds (a metric's metadata
//! and properties, DataSet, Template and extension values, field 5 `body`) is skipped by prost as
//! an unknown field, after its framing has been checked.

use prost::Message as _;

/// A Sparkplug B payload (`org.eclipse.tahu.protobuf.Payload`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Payload {
    /// When the message was sent, in milliseconds since 1970-01-01 UTC.
    #[prost(uint64, optional, tag = "1")]
    pub timestamp: Option<u64>,
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<Metric>,
    /// 0–255 per edge node, counting every NBIRTH, NDATA, DBIRTH, DDATA and DDEATH it sends.
    #[prost(uint64, optional, tag = "3")]
    pub seq: Option<u64>,
    #[prost(string, optional, tag = "4")]
    pub uuid: Option<String>,
}

/// One metric (`Payload.Metric`): its name on a birth, its alias afterwards, its value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metric {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(uint64, optional, tag = "2")]
    pub alias: Option<u64>,
    /// When the value was taken, in milliseconds since 1970-01-01 UTC.
    #[prost(uint64, optional, tag = "3")]
    pub timestamp: Option<u64>,
    /// One of [`datatype`]'s numbers; required on a birth, optional afterwards.
    #[prost(uint32, optional, tag = "4")]
    pub datatype: Option<u32>,
    #[prost(bool, optional, tag = "5")]
    pub is_historical: Option<bool>,
    #[prost(bool, optional, tag = "6")]
    pub is_transient: Option<bool>,
    #[prost(bool, optional, tag = "7")]
    pub is_null: Option<bool>,
    #[prost(oneof = "Value", tags = "10, 11, 12, 13, 14, 15, 16")]
    pub value: Option<Value>,
}

/// The scalar values of `Metric.value` (DataSet, Template and extension values are skipped).
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Value {
    /// Int8, Int16, Int32 (two's complement), UInt8, UInt16, UInt32.
    #[prost(uint32, tag = "10")]
    Int(u32),
    /// Int64 (two's complement), UInt64, DateTime (milliseconds).
    #[prost(uint64, tag = "11")]
    Long(u64),
    #[prost(float, tag = "12")]
    Float(f32),
    #[prost(double, tag = "13")]
    Double(f64),
    #[prost(bool, tag = "14")]
    Boolean(bool),
    /// String, Text, UUID.
    #[prost(string, tag = "15")]
    String(String),
    /// Bytes, File.
    #[prost(bytes = "vec", tag = "16")]
    Bytes(Vec<u8>),
}

/// The Sparkplug B data type numbers Galewatch reads (`DataType` in the proto).
pub mod datatype {
    pub(crate) const INT8: u32 = 1;
    pub(crate) const INT16: u32 = 2;
    pub(crate) const INT32: u32 = 3;
    pub(crate) const INT64: u32 = 4;
    pub const UINT8: u32 = 5;
    pub const UINT16: u32 = 6;
    pub const UINT32: u32 = 7;
    pub(crate) const UINT64: u32 = 8;
    pub const FLOAT: u32 = 9;
    pub const DOUBLE: u32 = 10;
    pub const BOOLEAN: u32 = 11;
    pub const STRING: u32 = 12;
    pub(crate) const DATETIME: u32 = 13;
    pub const TEXT: u32 = 14;

    /// The proto's name of a data type, for a rejection's detail.
    pub fn name(t: u32) -> &'static str {
        const NAMES: [&str; 21] = [
            "Unknown",
            "Int8",
            "Int16",
            "Int32",
            "Int64",
            "UInt8",
            "UInt16",
            "UInt32",
            "UInt64",
            "Float",
            "Double",
            "Boolean",
            "String",
            "DateTime",
            "Text",
            "UUID",
            "DataSet",
            "Bytes",
            "File",
            "Template",
            "PropertySet",
        ];
        NAMES
            .get(t as usize)
            .copied()
            .unwrap_or("an array or unknown type")
    }
}

/// Why a payload is not a Sparkplug B payload Galewatch will read.
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    /// More metrics than the limit: checked before any is decoded, so a payload of a million
    /// empty metrics never becomes a million structs.
    TooMany { limit: usize },
    /// Not protobuf, or not the Tahu `Payload`.
    Malformed(String),
}

/// Decodes a payload, holding at most `max_metrics` metrics.
pub fn decode(bytes: &[u8], max_metrics: usize) -> Result<Payload, Refused> {
    let metrics = count_metrics(bytes).map_err(Refused::Malformed)?;
    if metrics > max_metrics {
        return Err(Refused::TooMany { limit: max_metrics });
    }
    Payload::decode(bytes).map_err(|e| Refused::Malformed(e.to_string()))
}

/// Counts the top-level field-2 (metrics) entries by walking the framing alone. Protobuf groups
/// (wire types 3 and 4), which the Tahu proto never uses, are refused here.
fn count_metrics(mut buf: &[u8]) -> Result<usize, String> {
    let mut metrics = 0;
    while !buf.is_empty() {
        let key = prost::encoding::decode_varint(&mut buf).map_err(|e| e.to_string())?;
        let (tag, wire) = (key >> 3, key & 7);
        if tag == 0 {
            return Err("a field numbered 0".into());
        }
        let skip = match wire {
            0 => {
                prost::encoding::decode_varint(&mut buf).map_err(|e| e.to_string())?;
                0
            }
            1 => 8,
            2 => {
                let len = prost::encoding::decode_varint(&mut buf).map_err(|e| e.to_string())?;
                if tag == 2 {
                    metrics += 1;
                }
                usize::try_from(len).unwrap_or(usize::MAX)
            }
            5 => 4,
            w => {
                return Err(format!(
                    "field {tag} has wire type {w}, which Sparkplug B never uses"
                ))
            }
        };
        if skip > buf.len() {
            return Err(format!("field {tag} runs past the end of the payload"));
        }
        buf = &buf[skip..];
    }
    Ok(metrics)
}

impl Payload {
    /// The payload's bytes (for the simulator, the rebirth command and the tests).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }
}

impl Metric {
    /// A metric carrying `value`, its data type given.
    pub fn new(datatype: u32, value: Value) -> Metric {
        Metric {
            datatype: Some(datatype),
            value: Some(value),
            ..Metric::default()
        }
    }

    pub fn named(mut self, name: &str) -> Metric {
        self.name = Some(name.to_string());
        self
    }

    pub fn aliased(mut self, alias: u64) -> Metric {
        self.alias = Some(alias);
        self
    }

    pub fn at(mut self, ms: u64) -> Metric {
        self.timestamp = Some(ms);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_skips_what_it_does_not_declare() {
        let p = Payload {
            timestamp: Some(1_764_465_880_123),
            metrics: vec![
                Metric::new(datatype::DOUBLE, Value::Double(1523.4))
                    .named("power")
                    .aliased(3)
                    .at(1_764_465_880_000),
                Metric::new(datatype::INT8, Value::Int(0xFFFF_FFFF)).aliased(4),
            ],
            seq: Some(7),
            uuid: None,
        };
        let mut bytes = p.to_bytes();
        assert_eq!(decode(&bytes, 10), Ok(p.clone()));
        // A field this file does not declare (5, `body`) is skipped.
        bytes.extend([0x2A, 0x02, 0xAB, 0xCD]);
        assert_eq!(decode(&bytes, 10), Ok(p));
    }

    #[test]
    fn the_metric_limit_is_checked_before_decoding() {
        // A million empty metrics: two bytes each.
        let bytes = [0x12u8, 0x00].repeat(1_000_000);
        assert_eq!(
            decode(&bytes, 10_000),
            Err(Refused::TooMany { limit: 10_000 })
        );
        assert_eq!(decode(&bytes[..20], 10).map(|p| p.metrics.len()), Ok(10));
    }

    #[test]
    fn broken_framing_is_malformed_never_a_panic() {
        for bad in [
            &[0x12u8, 0x05, 0x01][..],     // length past the end
            &[0xFF; 11][..],               // varint too long
            &[0x13][..],                   // a group
            &[0x00, 0x01][..],             // field 0
            &[0x22, 0x02, 0xC3, 0x28][..], // uuid not UTF-8
        ] {
            assert!(
                matches!(decode(bad, 10), Err(Refused::Malformed(_))),
                "{bad:?}"
            );
        }
    }
}
