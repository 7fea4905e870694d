//! How the core's values travel to and from PostgreSQL: each signal kind's column type, a
//! datum as a statement parameter, and values read back from a row.

use bytes::BytesMut;
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
