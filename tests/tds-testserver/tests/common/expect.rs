//! What tiberius decodes each engine `Value` to.
#![allow(clippy::unwrap_used, dead_code)]

use std::borrow::Cow;

use tds_testserver::engine::{SqlType, Value};
use tiberius::numeric::Numeric;
use tiberius::time::{Date, DateTime, DateTime2, DateTimeOffset, SmallDateTime, Time};
use tiberius::xml::XmlData;
use tiberius::{ColumnData, Uuid};

/// The tiberius value each of `every_type()`'s values must decode to.
pub fn expected_column_data(ty: SqlType, v: &Value) -> ColumnData<'static> {
    let null = v.is_null();
    macro_rules! opt {
        ($variant:ident, $e:expr) => {
            ColumnData::$variant(if null { None } else { Some($e) })
        };
    }
    match (ty, v) {
        (SqlType::Bit, _) => opt!(Bit, matches!(v, Value::Bit(true))),
        (SqlType::TinyInt, Value::TinyInt(x)) => ColumnData::U8(Some(*x)),
        (SqlType::TinyInt, _) => ColumnData::U8(None),
        (SqlType::SmallInt, Value::SmallInt(x)) => ColumnData::I16(Some(*x)),
        (SqlType::SmallInt, _) => ColumnData::I16(None),
        (SqlType::Int, Value::Int(x)) => ColumnData::I32(Some(*x)),
        (SqlType::Int, _) | (SqlType::SqlVariant, Value::Null) => {
            if ty == SqlType::SqlVariant {
                ColumnData::String(None)
            } else {
                ColumnData::I32(None)
            }
        }
        (SqlType::SqlVariant, Value::Int(x)) => ColumnData::I32(Some(*x)),
        (SqlType::BigInt, Value::BigInt(x)) => ColumnData::I64(Some(*x)),
        (SqlType::BigInt, _) => ColumnData::I64(None),
        (SqlType::Real, Value::Real(x)) => ColumnData::F32(Some(*x)),
        (SqlType::Real, _) => ColumnData::F32(None),
        (SqlType::Float, Value::Float(x)) => ColumnData::F64(Some(*x)),
        (SqlType::Float, _) => ColumnData::F64(None),
        (SqlType::Money | SqlType::SmallMoney, Value::Money(m)) => {
            ColumnData::F64(Some(*m as f64 / 10_000.0))
        }
        (SqlType::Money | SqlType::SmallMoney, _) => ColumnData::F64(None),
        (SqlType::Decimal { .. } | SqlType::Numeric { .. }, Value::Decimal { mantissa, scale }) => {
            ColumnData::Numeric(Some(Numeric::new_with_scale(*mantissa, *scale)))
        }
        (SqlType::Decimal { .. } | SqlType::Numeric { .. }, _) => ColumnData::Numeric(None),
        (SqlType::Date, Value::Date(d)) => ColumnData::Date(Some(Date::new(*d))),
        (SqlType::Date, _) => ColumnData::Date(None),
        (SqlType::Time { scale }, Value::Time(t)) => {
            ColumnData::Time(Some(Time::new(t / 10u64.pow(u32::from(7 - scale)), scale)))
        }
        (SqlType::Time { .. }, _) => ColumnData::Time(None),
        (SqlType::DateTime, Value::DateTime { days, ticks }) => {
            ColumnData::DateTime(Some(DateTime::new(*days, *ticks)))
        }
        (SqlType::DateTime, _) => ColumnData::DateTime(None),
        (SqlType::SmallDateTime, Value::SmallDateTime { days, minutes }) => {
            ColumnData::SmallDateTime(Some(SmallDateTime::new(*days, *minutes)))
        }
        // tiberius decodes a NULL of DATETIMEN(4) as DateTime(None).
        (SqlType::SmallDateTime, _) => ColumnData::DateTime(None),
        (SqlType::DateTime2 { scale }, Value::DateTime2 { days, time }) => {
            ColumnData::DateTime2(Some(DateTime2::new(
                Date::new(*days),
                Time::new(time / 10u64.pow(u32::from(7 - scale)), scale),
            )))
        }
        (SqlType::DateTime2 { .. }, _) => ColumnData::DateTime2(None),
        (
            SqlType::DateTimeOffset { scale },
            Value::DateTimeOffset {
                days,
                time,
                offset_minutes,
            },
        ) => ColumnData::DateTimeOffset(Some(DateTimeOffset::new(
            DateTime2::new(
                Date::new(*days),
                Time::new(time / 10u64.pow(u32::from(7 - scale)), scale),
            ),
            *offset_minutes,
        ))),
        (SqlType::DateTimeOffset { .. }, _) => ColumnData::DateTimeOffset(None),
        (SqlType::UniqueIdentifier, Value::Guid(g)) => ColumnData::Guid(Some(Uuid::from_bytes(*g))),
        (SqlType::UniqueIdentifier, _) => ColumnData::Guid(None),
        (SqlType::Xml, Value::String(s)) => ColumnData::Xml(Some(Cow::Owned(XmlData::new(s)))),
        (SqlType::Xml, _) => ColumnData::Xml(None),
        (_, Value::String(s)) => ColumnData::String(Some(Cow::Owned(s.clone()))),
        (_, Value::Binary(b)) => ColumnData::Binary(Some(Cow::Owned(b.clone()))),
        (SqlType::Binary { .. } | SqlType::VarBinary { .. } | SqlType::Image | SqlType::RowVersion, _) => {
            ColumnData::Binary(None)
        }
        (_, _) => ColumnData::String(None),
    }
}
