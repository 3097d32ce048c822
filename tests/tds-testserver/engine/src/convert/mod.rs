//! Values in SQLite storage form and conversions between SQL Server types.
//!
//! Storage forms (chosen so values round-trip exactly and sort correctly as text):
//! ints/bit INTEGER; float/real REAL; decimal/numeric/money TEXT with the column's fixed scale
//! (compared numerically through the `DEC` collation); date `YYYY-MM-DD`; time
//! `HH:MM:SS.fffffff`; datetime2 `YYYY-MM-DD HH:MM:SS.fffffff`; datetime `... .fff0000`;
//! smalldatetime `... HH:MM:00.0000000` (datetime and smalldatetime use datetime2's width so all
//! three compare correctly as text); datetimeoffset local time + ` +HH:MM`; GUID upper-case text;
//! strings TEXT; binaries BLOB.

pub mod calendar;
pub mod clr;
pub mod datetime;
pub mod decimal;
mod digits;
mod errors;
pub mod explicit;
pub mod guid;
pub mod month_names;
pub mod row_buffer;
pub mod row_decoder;
pub mod storage;
#[cfg(test)]
mod tests;
pub mod values;
pub mod variant;

pub use calendar::{DateTimeParts, civil_from_days, days_from_civil};
pub use datetime::{format_date, format_datetime_parts, parse_datetime};
pub use decimal::{decimal_from_f64, format_decimal, format_float, parse_decimal, rescale};
pub use guid::{format_guid, parse_guid};
pub use storage::{coerce, coerce_in, fast_storage_into, value_to_storage, value_to_stored};
