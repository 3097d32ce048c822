//! T-SQL LIKE, translated for PostgreSQL, answers as the TDS test server (standing in for SQL
//! Server) does, for every pair of a set of patterns and values chosen at the edges: classes,
//! negation, literal brackets, `%` and `_`, ESCAPE, case, and trailing blanks of a varchar value.
#![allow(clippy::unwrap_used)]

mod common;

use common::start_tds_server;
use mssql_pg_worker::pg::expr::{Columns, translate};
use mssql_pg_worker::schema::mssql_to_pg_types::PgType;

struct V;
impl Columns for V {
    fn lookup(&self, name: &str) -> Option<(&str, PgType)> {
        (name == "v").then_some(("v", PgType::Varchar { length: 20 }))
    }
}

const PATTERNS: &[(&str, Option<char>)] = &[
    ("abc", None),
    ("a%", None),
    ("%c", None),
    ("a_c", None),
    ("[a-c]%", None),
    ("[^a]%", None),
    ("%[%]%", None),
    ("a[_]c", None),
    ("[[]%", None),
    ("%]", None),
    ("ab ", None),
    ("a", None),
    ("_", None),
    ("%", None),
    ("", None),
    ("[0-9][0-9]", None),
    ("A%C", None),
    ("[!a]%", None),
    ("%.%", None),
    ("a!%", Some('!')),
    ("a!_c", Some('!')),
    ("[a-c][^0-9]_", None),
    ("a_", None),
    ("%a ", None),
];

const VALUES: &[&str] = &[
    "abc", "ABC", "a_c", "axc", "[x", "x]", "50%", "ab ", "a  ", "a", "", "12", "1a", "bcd", "!x", "a.b",
    "a%", "Ab", "é", "ab",
];

fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

#[tokio::test]
async fn translated_like_answers_as_the_source_does() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    let pg = common::pg_connect().await;
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for (pattern, escape) in PATTERNS {
        let esc = escape.map_or(String::new(), |e| format!(" ESCAPE '{e}'"));
        let check = format!("([v] LIKE {}{esc})", lit(pattern));
        let pg_expr = translate(&check, &V, false).unwrap_or_else(|e| panic!("{check}: {e}"));
        for value in VALUES {
            let ms_sql = format!(
                "SELECT CASE WHEN {} LIKE {}{esc} THEN 1 ELSE 0 END",
                lit(value),
                lit(pattern)
            );
            let rows = ms
                .simple_query(&ms_sql)
                .await
                .unwrap()
                .into_first_result()
                .await
                .unwrap();
            let ms_says = rows[0].get::<i32, _>(0).unwrap() == 1;
            // Varchar values: SQL Server ignores any number of their trailing blanks in LIKE
            // (`'a  ' LIKE 'a_'` holds), as the translation does.
            let pg_sql = format!("SELECT {pg_expr} FROM (VALUES ($1::varchar(20))) AS x(v)");
            let pg_says: bool = pg.query_one(&pg_sql, &[value]).await.unwrap().get(0);
            checked += 1;
            if ms_says != pg_says {
                mismatches.push(format!(
                    "{value:?} LIKE {pattern:?}{esc}: SQL Server {ms_says}, PostgreSQL {pg_says} ({pg_expr})"
                ));
            }
        }
    }
    assert_eq!(checked, PATTERNS.len() * VALUES.len());
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
