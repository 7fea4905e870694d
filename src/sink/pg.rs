//! How the core's values travel to and from PostgreSQL: each signal kind's column type, a
//! datum as a statement parameter, and values read back from a row.

use bytes::BytesMut;
use chrono::{DateTime, Utc};
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use tokio_postgres::Row;

use crate::core::reading::Values;
use crate::core::signals::{Datum, Kind, Signals};

impl Kind {
    /// The column type a signal of this kind is stored in.
    pub(crate) fn pg_type(self) -> Type {
        match self {
            Kind::Float => Type::FLOAT8,
            Kind::Integer => Type::INT8,
            Kind::Boolean => Type::BOOL,
            Kind::Text => Type::TEXT,
        }
    }
}

impl Signals {
    /// Reads the values of the signals from `row`, starting at column `first`.
    pub fn from_row(&self, row: &Row, first: usize) -> Values {
        Values(
            self.iter()
                .enumerate()
                .map(|(i, s)| Datum::from_row(row, first + i, s.kind))
                .collect(),
        )
    }
}

impl Datum {
    /// Column `i` of `row`, read as `kind`.
    pub(crate) fn from_row(row: &Row, i: usize, kind: Kind) -> Datum {
        let d = match kind {
            Kind::Float => row.get::<_, Option<f64>>(i).map(Datum::Float),
            Kind::Integer => row.get::<_, Option<i64>>(i).map(Datum::Int),
            Kind::Boolean => row.get::<_, Option<bool>>(i).map(Datum::Bool),
            Kind::Text => row
                .get::<_, Option<String>>(i)
                .map(|s| Datum::Text(s.into())),
        };
        d.unwrap_or(Datum::Null)
    }
}

impl ToSql for Datum {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Datum::Null => Ok(IsNull::Yes),
            Datum::Float(v) => v.to_sql(ty, out),
            Datum::Int(v) => v.to_sql(ty, out),
            Datum::Bool(v) => v.to_sql(ty, out),
            Datum::Text(v) => (&**v).to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        [Type::FLOAT8, Type::INT8, Type::BOOL, Type::TEXT].contains(ty)
    }

    to_sql_checked!();
}

/// An eight-byte number as PostgreSQL sends it in binary: its element type, its array type and
/// its bits.
pub(crate) trait Eight: Copy + std::fmt::Debug + Sync {
    const ELEMENT: Type;
    const ARRAY: Type;
    fn bits(self) -> u64;
}

impl Eight for f64 {
    const ELEMENT: Type = Type::FLOAT8;
    const ARRAY: Type = Type::FLOAT8_ARRAY;
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

impl Eight for i64 {
    const ELEMENT: Type = Type::INT8;
    const ARRAY: Type = Type::INT8_ARRAY;
    fn bits(self) -> u64 {
        self as u64
    }
}

/// A `timestamptz` parameter: microseconds since 2000-01-01 as PostgreSQL's binary format has
/// them. chrono's own encoding builds its 2000-01-01 from a calendar date and subtracts, about
/// 190 instructions a value, and a batch sends several a reading (COPY, clock health, statistics);
/// this is the same number from the Unix seconds, chrono's arithmetic kept for what it does not
/// cover (before 2000, a leap second). Byte for byte chrono's encoding (a property test).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp(pub DateTime<Utc>);

/// 2000-01-01T00:00:00Z, PostgreSQL's epoch, in Unix seconds.
const PG_EPOCH: i64 = 946_684_800;

impl Eight for Stamp {
    const ELEMENT: Type = Type::TIMESTAMPTZ;
    const ARRAY: Type = Type::TIMESTAMPTZ_ARRAY;
    fn bits(self) -> u64 {
        let (secs, nanos) = (self.0.timestamp(), self.0.timestamp_subsec_nanos());
        let micros = if secs >= PG_EPOCH && nanos < 1_000_000_000 {
            (secs - PG_EPOCH) * 1_000_000 + i64::from(nanos / 1_000)
        } else {
            let epoch = DateTime::<Utc>::from_timestamp(PG_EPOCH, 0).expect("in range");
            // Within ±262,000 years of 2000 (chrono's range) the microseconds fit an i64.
            (self.0 - epoch).num_microseconds().unwrap_or(i64::MAX)
        };
        micros as u64
    }
}

impl ToSql for Stamp {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use bytes::BufMut;
        out.put_u64(self.bits());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMPTZ
    }

    to_sql_checked!();
}

/// A column of eight-byte numbers as a one-dimensional array parameter (`float8[]`, `int8[]`),
/// written in place into a buffer sized once. `Vec<Option<T>>`'s own encoding goes element
/// by element through closures and a growing buffer: a tenth of the daemon's instructions at one
/// reading a message, where a batch's statistics upsert carries about forty numbers a reading.
#[derive(Debug, Default)]
pub(crate) struct Column8<T>(pub Vec<Option<T>>);

impl<T: Eight> ToSql for Column8<T> {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let len = i32::try_from(self.0.len()).map_err(|_| "an array of more than 2^31 values")?;
        let nulls = self.0.iter().filter(|v| v.is_none()).count();
        // The header, then each value as its length and its bits, or -1 for a NULL: sized
        // exactly, then written in place (no capacity check per value).
        let start = out.len();
        out.resize(start + 20 + (self.0.len() - nulls) * 12 + nulls * 4, 0);
        let buf = &mut out[start..];
        let (head, body) = buf.split_at_mut(20);
        for (k, word) in [1, i32::from(nulls > 0), T::ELEMENT.oid() as i32, len, 1]
            .into_iter()
            .enumerate()
        {
            // dimensions, whether any is NULL, the element type, the length, the lower bound
            head[4 * k..4 * k + 4].copy_from_slice(&word.to_be_bytes());
        }
        let mut at = 0;
        for v in &self.0 {
            match v {
                Some(x) => {
                    body[at..at + 4].copy_from_slice(&8i32.to_be_bytes());
                    body[at + 4..at + 12].copy_from_slice(&x.bits().to_be_bytes());
                    at += 12;
                }
                None => {
                    body[at..at + 4].copy_from_slice(&(-1i32).to_be_bytes());
                    at += 4;
                }
            }
        }
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == T::ARRAY
    }

    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Byte for byte what the driver's own encoding of `Vec<Option<T>>` writes.
        #[test]
        fn a_column_is_encoded_as_the_driver_encodes_it(
            floats in proptest::collection::vec(proptest::option::of(any::<f64>()), 0..40),
            ints in proptest::collection::vec(proptest::option::of(any::<i64>()), 0..40),
        ) {
            // After what the buffer holds already (a bind message's earlier parameters).
            let (mut ours, mut theirs) = (BytesMut::from(&b"prefix"[..]), BytesMut::from(&b"prefix"[..]));
            Column8(floats.clone()).to_sql_checked(&Type::FLOAT8_ARRAY, &mut ours).unwrap();
            floats.to_sql_checked(&Type::FLOAT8_ARRAY, &mut theirs).unwrap();
            prop_assert_eq!(&ours, &theirs);
            let (mut ours, mut theirs) = (BytesMut::new(), BytesMut::new());
            Column8(ints.clone()).to_sql_checked(&Type::INT8_ARRAY, &mut ours).unwrap();
            ints.to_sql_checked(&Type::INT8_ARRAY, &mut theirs).unwrap();
            prop_assert_eq!(&ours, &theirs);
            prop_assert!(Column8(ints).to_sql_checked(&Type::FLOAT8_ARRAY, &mut ours).is_err());
        }

        /// A timestamp, alone and in an array, byte for byte as chrono's `DateTime<Utc>` writes
        /// it: across chrono's whole range, before and after 2000, with nanoseconds that are not
        /// whole microseconds and in a leap second.
        #[test]
        fn stamps_encode_as_chrono_does(
            secs in prop_oneof![
                -8_000_000_000_000i64..8_000_000_000_000,
                PG_EPOCH - 100..PG_EPOCH + 100,
                900_000_000i64..4_000_000_000,
            ],
            nanos in prop_oneof![0u32..2_000_000_000, (0u32..1_000_000).prop_map(|u| u * 1000)],
            more in proptest::collection::vec(proptest::option::of(0i64..4_000_000_000), 0..10),
        ) {
            let Some(t) = DateTime::<Utc>::from_timestamp(secs, nanos) else {
                return Ok(());
            };
            let (mut ours, mut theirs) = (BytesMut::new(), BytesMut::new());
            let ours_is = Stamp(t).to_sql_checked(&Type::TIMESTAMPTZ, &mut ours);
            let theirs_is = t.to_sql_checked(&Type::TIMESTAMPTZ, &mut theirs);
            prop_assert_eq!(ours_is.is_ok(), theirs_is.is_ok());
            prop_assert_eq!(&ours, &theirs);
            let column: Vec<Option<DateTime<Utc>>> = more
                .iter()
                .map(|s| s.and_then(|s| DateTime::from_timestamp(s, nanos % 1_000_000_000)))
                .chain([Some(t)])
                .collect();
            let (mut ours, mut theirs) = (BytesMut::new(), BytesMut::new());
            Column8(column.iter().map(|t| t.map(Stamp)).collect())
                .to_sql_checked(&Type::TIMESTAMPTZ_ARRAY, &mut ours)
                .unwrap();
            column.to_sql_checked(&Type::TIMESTAMPTZ_ARRAY, &mut theirs).unwrap();
            prop_assert_eq!(&ours, &theirs);
            prop_assert!(Stamp(t).to_sql_checked(&Type::TIMESTAMP, &mut ours).is_err());
        }
    }
}
