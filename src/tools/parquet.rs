//! Parquet: an export's rows as one Parquet file, with the arrow-rs crate's own column writers
//! (no arrow): typed columns as [`figures`](crate::tools::figures) declares them (UTF-8 text,
//! `interval_start` as INT64 TIMESTAMP(MICROS, isAdjustedToUTC = true), INT32 and INT64 counts,
//! DOUBLE figures; OPTIONAL where a NULL can occur), in row groups of a bounded number of cells,
//! so memory stays flat however long the export.
//!
//! The writer only appends (the footer comes last), so it streams to a pipe as well as to a file.

use std::io::Write;
use std::sync::Arc;

use ::parquet::basic::{Compression, LogicalType, Repetition, TimeUnit, Type as Physical};
use ::parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
use ::parquet::file::properties::WriterProperties;
use ::parquet::file::writer::SerializedFileWriter;
use ::parquet::schema::types::Type as Schema;
use bytes::Bytes;

use crate::tools::figures::{Cell, Column, Type};

/// How the pages are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Codec {
    /// Snappy (every Parquet reader has it).
    #[default]
    Snappy,
    /// None: larger, a little faster to write.
    None,
}

/// Cells a row group holds at most (about 10 bytes each while it is gathered).
const GROUP_CELLS: usize = 1 << 21;

/// Rows a row group holds: [`GROUP_CELLS`] over the columns, from 1,024 to 65,536 rows.
fn group_rows(columns: usize) -> usize {
    (GROUP_CELLS / columns.max(1)).clamp(1024, 65_536)
}

/// One column's values of the row group being gathered.
enum Values {
    Text(Vec<ByteArray>),
    Int32(Vec<i32>),
    Int64(Vec<i64>),
    Float(Vec<f64>),
}

struct Gathered {
    values: Values,
    /// Definition levels (1: a value, 0: NULL); only for a nullable column.
    def: Option<Vec<i16>>,
}

/// A Parquet file being written to `W`.
pub struct Writer<W: Write + Send> {
    file: SerializedFileWriter<W>,
    columns: Vec<Column>,
    gathered: Vec<Gathered>,
    rows: usize,
    group: usize,
}

/// A message for a Parquet error (the crate's, or the output's).
fn err(e: ::parquet::errors::ParquetError) -> String {
    if let ::parquet::errors::ParquetError::External(x) = &e {
        if let Some(io) = x.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::BrokenPipe {
                return "writing Parquet: the reader went away, so the file is incomplete (unreadable without its footer)".into();
            }
            return format!("writing Parquet: {io}");
        }
    }
    format!("writing Parquet: {e}")
}

/// The file's schema: one field per column.
pub fn schema(columns: &[Column]) -> Result<Schema, String> {
    let fields = columns
        .iter()
        .map(|c| {
            let (physical, logical) = match c.ty {
                Type::Text => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
                Type::Time => (
                    Physical::INT64,
                    Some(LogicalType::timestamp(true, TimeUnit::MICROS)),
                ),
                Type::Int32 => (Physical::INT32, None),
                Type::Int64 => (Physical::INT64, None),
                Type::Float => (Physical::DOUBLE, None),
            };
            let repetition = if c.nullable {
                Repetition::OPTIONAL
            } else {
                Repetition::REQUIRED
            };
            Schema::primitive_type_builder(&c.name, physical)
                .with_logical_type(logical)
                .with_repetition(repetition)
                .build()
                .map(Arc::new)
                .map_err(err)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Schema::group_type_builder("galewatch_export")
        .with_fields(fields)
        .build()
        .map_err(err)
}

impl<W: Write + Send> Writer<W> {
    /// Starts a file of `columns` on `out` (its first bytes are written now).
    pub fn new(out: W, columns: &[Column], codec: Codec) -> Result<Writer<W>, String> {
        let props = WriterProperties::builder()
            .set_compression(match codec {
                Codec::Snappy => Compression::SNAPPY,
                Codec::None => Compression::UNCOMPRESSED,
            })
            .set_created_by(format!("galewatch {}", env!("CARGO_PKG_VERSION")))
            .build();
        let file = SerializedFileWriter::new(out, Arc::new(schema(columns)?), Arc::new(props))
            .map_err(err)?;
        let group = group_rows(columns.len());
        let gathered = columns
            .iter()
            .map(|c| Gathered {
                values: match c.ty {
                    Type::Text => Values::Text(Vec::with_capacity(group)),
                    Type::Int32 => Values::Int32(Vec::with_capacity(group)),
                    Type::Time | Type::Int64 => Values::Int64(Vec::with_capacity(group)),
                    Type::Float => Values::Float(Vec::with_capacity(group)),
                },
                def: c.nullable.then(|| Vec::with_capacity(group)),
            })
            .collect();
        Ok(Writer {
            file,
            columns: columns.to_vec(),
            gathered,
            rows: 0,
            group,
        })
    }

    /// Adds a row (cells in the columns' order); a full row group is written out.
    pub fn push(&mut self, cells: &[Cell]) -> Result<(), String> {
        if cells.len() != self.columns.len() {
            return Err(format!(
                "a row of {} cells for {} columns",
                cells.len(),
                self.columns.len()
            ));
        }
        for ((cell, g), c) in cells.iter().zip(&mut self.gathered).zip(&self.columns) {
            let present = !matches!(cell, Cell::Null);
            match (cell, &mut g.values) {
                (Cell::Null, _) => {}
                (Cell::Text(s), Values::Text(v)) => v.push(ByteArray::from(s.as_bytes().to_vec())),
                (Cell::Flags(s), Values::Text(v)) => {
                    v.push(ByteArray::from(Bytes::from_static(s.as_bytes())))
                }
                (Cell::Time(t), Values::Int64(v)) => v.push(t.timestamp_micros()),
                (Cell::Int(i), Values::Int64(v)) => v.push(*i),
                (Cell::Int(i), Values::Int32(v)) => v.push(
                    i32::try_from(*i)
                        .map_err(|_| format!("{}: {i} is not a 32-bit integer", c.name))?,
                ),
                (Cell::Float(x), Values::Float(v)) => v.push(*x),
                (cell, _) => return Err(format!("{}: {cell:?} is not a {:?}", c.name, c.ty)),
            }
            match &mut g.def {
                Some(d) => d.push(i16::from(present)),
                None if !present => return Err(format!("{}: NULL in a required column", c.name)),
                None => {}
            }
        }
        self.rows += 1;
        if self.rows >= self.group {
            self.flush_group()?;
        }
        Ok(())
    }

    /// Writes the rows gathered as one row group.
    fn flush_group(&mut self) -> Result<(), String> {
        if self.rows == 0 {
            return Ok(());
        }
        let mut group = self.file.next_row_group().map_err(err)?;
        for g in &mut self.gathered {
            let mut col = group
                .next_column()
                .map_err(err)?
                .ok_or("writing Parquet: fewer columns in the schema than gathered")?;
            let def = g.def.as_deref();
            match &mut g.values {
                Values::Text(v) => {
                    let r = col.typed::<ByteArrayType>().write_batch(v, def, None);
                    v.clear();
                    r
                }
                Values::Int32(v) => {
                    let r = col.typed::<Int32Type>().write_batch(v, def, None);
                    v.clear();
                    r
                }
                Values::Int64(v) => {
                    let r = col.typed::<Int64Type>().write_batch(v, def, None);
                    v.clear();
                    r
                }
                Values::Float(v) => {
                    let r = col.typed::<DoubleType>().write_batch(v, def, None);
                    v.clear();
                    r
                }
            }
            .map_err(err)?;
            if let Some(d) = &mut g.def {
                d.clear();
            }
            col.close().map_err(err)?;
        }
        group.close().map_err(err)?;
        self.rows = 0;
        Ok(())
    }

    /// Writes the last row group and the footer; returns the output. With no row at all, a file
    /// of the schema and no row group.
    pub fn finish(mut self) -> Result<W, String> {
        self.flush_group()?;
        self.file.into_inner().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::parquet::file::reader::{FileReader, SerializedFileReader};
    use ::parquet::record::Field;

    fn columns() -> Vec<Column> {
        let c = |name: &str, ty, nullable| Column {
            name: name.into(),
            ty,
            nullable,
        };
        vec![
            c("turbine_id", Type::Text, false),
            c("interval_start", Type::Time, false),
            c("interval_seconds", Type::Int32, false),
            c("WTUR.W_avg", Type::Float, true),
            c("WTUR.W_flags", Type::Text, false),
        ]
    }

    #[test]
    fn rows_come_back_typed_with_their_nulls_across_row_groups() {
        let cols = columns();
        let mut w = Writer::new(Vec::new(), &cols, Codec::Snappy).unwrap();
        w.group = 3;
        let t0: chrono::DateTime<chrono::Utc> = "2026-11-20T00:00:00Z".parse().unwrap();
        for i in 0..7i64 {
            w.push(&[
                Cell::Text(format!("T-{i}")),
                Cell::Time(t0 + chrono::Duration::minutes(10 * i)),
                Cell::Int(600),
                if i % 2 == 0 {
                    Cell::Float(i as f64 * 0.5)
                } else {
                    Cell::Null
                },
                Cell::Flags(if i == 3 { "stuck,absent" } else { "" }),
            ])
            .unwrap();
        }
        let bytes = w.finish().unwrap();
        let r = SerializedFileReader::new(Bytes::from(bytes)).unwrap();
        assert_eq!(r.metadata().num_row_groups(), 3, "3 + 3 + 1 rows");
        let rows: Vec<_> = r.get_row_iter(None).unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(rows.len(), 7);
        let f: Vec<(&String, &Field)> = rows[3].get_column_iter().collect();
        assert_eq!(f[0].1, &Field::Str("T-3".into()));
        assert_eq!(
            f[1].1,
            &Field::TimestampMicros((t0 + chrono::Duration::minutes(30)).timestamp_micros())
        );
        assert_eq!(f[2].1, &Field::Int(600));
        assert_eq!(f[3], (&"WTUR.W_avg".to_string(), &Field::Null));
        assert_eq!(f[4].1, &Field::Str("stuck,absent".into()));
        assert_eq!(
            rows[4].get_column_iter().nth(3).unwrap().1,
            &Field::Double(2.0)
        );
        let schema = r.metadata().file_metadata().schema_descr();
        assert_eq!(
            schema.column(1).logical_type_ref(),
            Some(&LogicalType::timestamp(true, TimeUnit::MICROS))
        );
        assert!(schema.column(3).self_type().is_optional());
        assert!(!schema.column(0).self_type().is_optional());
    }

    #[test]
    fn no_rows_give_a_file_of_the_schema_and_bad_cells_are_refused() {
        let cols = columns();
        let bytes = Writer::new(Vec::new(), &cols, Codec::None)
            .unwrap()
            .finish()
            .unwrap();
        let r = SerializedFileReader::new(Bytes::from(bytes)).unwrap();
        assert_eq!(r.metadata().num_row_groups(), 0);
        assert_eq!(r.metadata().file_metadata().schema_descr().num_columns(), 5);
        let mut w = Writer::new(Vec::new(), &cols, Codec::None).unwrap();
        let t = Cell::Time("2026-11-20T00:00:00Z".parse().unwrap());
        let row = |id: Cell, secs: Cell| vec![id, t.clone(), secs, Cell::Null, Cell::Flags("")];
        let e = w.push(&row(Cell::Null, Cell::Int(600))).unwrap_err();
        assert!(e.contains("turbine_id: NULL"), "{e}");
        let e = w
            .push(&row(Cell::Text("x".into()), Cell::Int(1 << 40)))
            .unwrap_err();
        assert!(e.contains("not a 32-bit integer"), "{e}");
        assert!(w.push(&[Cell::Null]).unwrap_err().contains("1 cells for 5"));
    }

    #[test]
    fn row_groups_stay_within_the_cell_budget() {
        assert_eq!(group_rows(27), 65_536);
        assert_eq!(group_rows(1_406), 1_491);
        assert_eq!(group_rows(100_000), 1_024);
        assert!(group_rows(1_406) * 1_406 <= GROUP_CELLS);
    }
}
