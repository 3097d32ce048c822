//! The rows of a view (or any relation) on both sides as comparable text: each value in one
//! spelling whichever database returned it, the rows sorted.

use mssql_pg_worker::mssql::connect::TdsClient;
use tiberius::{ColumnData, FromSql};
use tokio_postgres::Client;

/// `1.50` and `1.5` are the same number (SQL Server's money arrives as a float).
fn number(s: String) -> String {
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn tds_value(c: &ColumnData<'static>) -> String {
    let dt = |c| {
        <chrono::NaiveDateTime as FromSql>::from_sql(c)
            .unwrap()
            .map(|v| v.to_string())
    };
    let v = match c {
        ColumnData::U8(v) => v.map(|v| v.to_string()),
        ColumnData::I16(v) => v.map(|v| v.to_string()),
        ColumnData::I32(v) => v.map(|v| v.to_string()),
        ColumnData::I64(v) => v.map(|v| v.to_string()),
        ColumnData::F64(v) => v.map(|v| number(v.to_string())),
        ColumnData::Bit(v) => v.map(|v| v.to_string()),
        ColumnData::Numeric(v) => v.map(|v| number(v.to_string())),
        ColumnData::String(v) => v.as_ref().map(|v| v.to_string()),
        ColumnData::Guid(v) => v.map(|v| v.to_string()),
        ColumnData::Xml(v) => v.as_ref().map(|v| v.to_string()),
        ColumnData::Date(_) => <chrono::NaiveDate as FromSql>::from_sql(c)
            .unwrap()
            .map(|v| v.to_string()),
        ColumnData::DateTime(_) | ColumnData::SmallDateTime(_) | ColumnData::DateTime2(_) => dt(c),
        other => panic!("a value of a type this comparison does not know: {other:?}"),
    };
    v.unwrap_or_else(|| "NULL".into())
}

/// Every row of `SELECT * FROM relation` on the SQL Server side, sorted.
pub async fn ms_rows(ms: &mut TdsClient, relation: &str) -> Vec<Vec<String>> {
    let rows = ms
        .simple_query(format!("SELECT * FROM {relation}"))
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    let mut out: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| r.into_iter().map(|c| tds_value(&c)).collect())
        .collect();
    out.sort();
    out
}

/// The same from PostgreSQL: each value cast to text, numbers without trailing zeros.
pub async fn pg_rows(pg: &Client, relation: &str) -> Vec<Vec<String>> {
    let stmt = pg.prepare(&format!("SELECT * FROM {relation}")).await.unwrap();
    let numeric: Vec<bool> = stmt
        .columns()
        .iter()
        .map(|c| matches!(c.type_().name(), "numeric" | "float8" | "float4"))
        .collect();
    // char(n) keeps its padding only read as it is: a cast to text drops trailing blanks.
    let cols: Vec<String> = stmt
        .columns()
        .iter()
        .map(|c| {
            let name = format!("\"{}\"", c.name().replace('"', "\"\""));
            match c.type_().name() {
                "bpchar" | "varchar" | "text" => format!("coalesce({name}, 'NULL')"),
                _ => format!("coalesce({name}::text, 'NULL')"),
            }
        })
        .collect();
    let mut out: Vec<Vec<String>> = pg
        .query(&format!("SELECT {} FROM {relation}", cols.join(", ")), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (0..cols.len())
                .map(|i| {
                    let v: String = r.get(i);
                    if numeric[i] && v != "NULL" { number(v) } else { v }
                })
                .collect()
        })
        .collect();
    out.sort();
    out
}
