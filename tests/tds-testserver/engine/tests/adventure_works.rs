//! Microsoft's AdventureWorks OLTP install script (`instawdb.sql`), run as sqlcmd runs it:
//! batch by batch, with `SqlSamplesSourceDataPath` pointing at the folder of its data files.
//! Then every table loaded from a data file holds as many rows as the file has.
//!
//! Seven data files are not in the sample's folder (see its README): `Person.csv`,
//! `SalesOrderHeader.csv`, `SalesOrderDetail.csv`, `TransactionHistory.csv`,
//! `TransactionHistoryArchive.csv`, `WorkOrder.csv`, `WorkOrderRouting.csv`. Their tables stay
//! empty, so their BULK INSERTs fail with 4860 and the foreign keys that reference
//! Person.Person and Sales.SalesOrderHeader fail with 547, as they would on SQL Server with
//! the same files. Full-text statements fail with 7609 (no full-text search here, as on a
//! server without it).
#![allow(clippy::unwrap_used)]
mod common;
#[path = "common/sqlcmd.rs"]
mod sqlcmd;
use common::*;
use std::path::PathBuf;
use std::sync::Arc;
use tds_testserver_engine::{Engine, EngineConfig, Session, SqlError};

/// The sample's folder: `AW_DIR`, or the shared checkout's `sample-databases` beside the repo.
fn aw_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("AW_DIR") {
        return PathBuf::from(d);
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.join("../../../../shared/sample-databases/adventure-works-oltp")
}

struct Failure {
    batch: usize,
    line: usize,
    first_line: String,
    errors: Vec<SqlError>,
}

fn run_script() -> (Arc<Engine>, Session, Vec<Failure>, usize) {
    let dir = aw_dir();
    let dir = dir
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e} (set AW_DIR to the sample's folder)", dir.display()));
    let script = std::fs::read_to_string(dir.join("instawdb.sql")).unwrap();
    let engine = Engine::open(EngineConfig {
        data_dir: None,
        database: "AdventureWorks".to_string(),
        bulk_insert_dir: Some(dir.clone()),
    })
    .unwrap();
    let mut s = engine.connect(Some("master")).unwrap();
    let path = format!("{}/", dir.display());
    let batches = sqlcmd::batches(&script, &[("SqlSamplesSourceDataPath", &path)]);
    let mut failures = Vec::new();
    for (i, b) in batches.iter().enumerate() {
        let started = std::time::Instant::now();
        let sink = run(&mut s, &b.sql);
        if std::env::var_os("AW_TIMING").is_some() && started.elapsed().as_millis() > 200 {
            eprintln!("batch {} (line {}): {:?}", i + 1, b.line, started.elapsed());
        }
        let errors: Vec<SqlError> = sink.errors().into_iter().filter(|e| e.class > 10).collect();
        if !errors.is_empty() {
            let first_line = b
                .sql
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with("--") && !l.starts_with("PRINT"))
                .unwrap_or("")
                .chars()
                .take(100)
                .collect();
            failures.push(Failure {
                batch: i + 1,
                line: b.line,
                first_line,
                errors,
            });
        }
    }
    (engine, s, failures, batches.len())
}

fn report(failures: &[Failure]) -> String {
    let mut out = String::new();
    for f in failures {
        out.push_str(&format!(
            "batch {} (line {}): {}\n",
            f.batch, f.line, f.first_line
        ));
        for e in &f.errors {
            out.push_str(&format!("    {e}\n"));
        }
    }
    out
}

/// Prints every failing batch with its errors (`AW_FAILURES=path` also writes them there).
#[test]
#[ignore = "a report, not a check: run with --ignored --nocapture"]
fn script_failures_report() {
    let (_e, _s, failures, total) = run_script();
    let text = report(&failures);
    if let Some(path) = std::env::var_os("AW_FAILURES") {
        std::fs::write(
            path,
            format!("{} of {total} batches fail\n{text}", failures.len()),
        )
        .unwrap();
    }
    println!("{} of {total} batches fail\n{text}", failures.len());
}

/// The data files the sample's folder lacks: their tables stay empty.
const MISSING_FILES: &[&str] = &[
    "Person.csv",
    "SalesOrderHeader.csv",
    "SalesOrderDetail.csv",
    "TransactionHistory.csv",
    "TransactionHistoryArchive.csv",
    "WorkOrder.csv",
    "WorkOrderRouting.csv",
];

/// The batches that fail, by their first line, with the error numbers they fail with.
const EXPECTED_FAILURES: &[(&str, &[i32])] = &[
    ("BULK INSERT [Person].[Address]", &[4860; 7]),
    ("CREATE FULLTEXT CATALOG", &[7609]),
    ("CREATE FULLTEXT INDEX ON Production.ProductReview", &[7609]),
    ("CREATE FULLTEXT INDEX ON HumanResources.JobCandidate", &[7609]),
    ("CREATE FULLTEXT INDEX ON Production.Document", &[7609]),
    ("ALTER TABLE [Person].[BusinessEntityContact] ADD", &[547]),
    ("ALTER TABLE [Sales].[Customer] ADD", &[547]),
    ("ALTER TABLE [Person].[EmailAddress] ADD", &[547]),
    ("ALTER TABLE [HumanResources].[Employee] ADD", &[547]),
    ("ALTER TABLE [Person].[Password] ADD", &[547]),
    ("ALTER TABLE [Sales].[PersonCreditCard] ADD", &[547]),
    ("ALTER TABLE [Person].[PersonPhone] ADD", &[547]),
    ("ALTER TABLE [Sales].[SalesOrderHeaderSalesReason] ADD", &[547]),
];

/// One `BULK INSERT table FROM '...file'` of the script with its row terminator as written.
struct Load {
    table: String,
    file: String,
    field_terminator: String,
    row_terminator: String,
}

fn loads(script: &str) -> Vec<Load> {
    let mut out = Vec::new();
    for part in script.split("BULK INSERT ").skip(1) {
        let table = part.split_whitespace().next().unwrap().to_string();
        let from = part.split('\'').nth(1).unwrap();
        let file = from.rsplit(['/', ')']).next().unwrap().to_string();
        let options = &part[..part.find(");").unwrap()];
        let row_terminator = options
            .split("ROWTERMINATOR")
            .nth(1)
            .map(|r| r.split('\'').nth(1).unwrap().to_string())
            .unwrap_or_else(|| "\\n".to_string());
        let field_terminator = options
            .split("FIELDTERMINATOR")
            .nth(1)
            .map(|r| r.split('\'').nth(1).unwrap().to_string())
            .unwrap_or_else(|| "\\t".to_string());
        out.push(Load {
            table,
            file,
            field_terminator,
            row_terminator,
        });
    }
    out
}

/// A terminator as written in the script: its bytes, and whether it was written with `\n`
/// (which also matches `\r\n`).
fn terminator(t: &str) -> (Vec<u8>, bool) {
    if let Some(hex) = t.strip_prefix("0x") {
        return (vec![u8::from_str_radix(hex, 16).unwrap()], false);
    }
    match t.strip_suffix("\\n") {
        Some(h) => (h.replace("\\t", "\t").into_bytes(), true),
        None => (t.replace("\\t", "\t").into_bytes(), false),
    }
}

/// Where the terminator ends when it starts at `i`.
fn ends_at(data: &[u8], i: usize, (head, newline): &(Vec<u8>, bool)) -> Option<usize> {
    if !data[i..].starts_with(head) {
        return None;
    }
    let mut j = i + head.len();
    if *newline {
        if data.get(j) == Some(&b'\r') && data.get(j + 1) == Some(&b'\n') {
            j += 1;
        }
        if data.get(j) != Some(&b'\n') {
            return None;
        }
        j += 1;
    }
    Some(j)
}

/// Rows of a data file as BULK INSERT reads them: each row is `width` fields, the last ending
/// at the row terminator, the others at the field terminator (so a value may hold a line
/// break); the last row may lack its terminator.
fn file_rows(data: &[u8], field: &str, row: &str, width: usize) -> i64 {
    let (field, row) = (terminator(field), terminator(row));
    let mut rows = 0;
    let mut i = 0;
    while i < data.len() {
        for k in 0..width {
            let term = if k + 1 == width { &row } else { &field };
            let mut end = None;
            let mut p = i;
            while p < data.len() {
                if let Some(e) = ends_at(data, p, term) {
                    end = Some(e);
                    break;
                }
                p += 1;
            }
            i = end.unwrap_or(data.len());
        }
        rows += 1;
    }
    rows
}

#[test]
fn adventure_works_loads_as_written() {
    let (_e, mut s, failures, total) = run_script();
    let got: Vec<(String, Vec<i32>)> = failures
        .iter()
        .map(|f| (f.first_line.clone(), f.errors.iter().map(|e| e.number).collect()))
        .collect();
    let unexpected: Vec<&Failure> = failures
        .iter()
        .filter(|f| {
            !EXPECTED_FAILURES.iter().any(|(start, numbers)| {
                f.first_line.starts_with(start)
                    && (numbers.is_empty()
                        || f.errors.iter().map(|e| e.number).collect::<Vec<_>>() == *numbers)
            })
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "{} of {total} batches fail unexpectedly:\n{}",
        unexpected.len(),
        report(&failures)
    );
    assert_eq!(got.len(), EXPECTED_FAILURES.len(), "{}", report(&failures));

    let dir = aw_dir();
    let script = std::fs::read_to_string(dir.join("instawdb.sql")).unwrap();
    let loads = loads(&script);
    assert_eq!(loads.len(), 68);
    let mut checked = 0;
    for l in &loads {
        let count = match scalar(&mut s, &format!("SELECT COUNT_BIG(*) FROM {}", l.table)) {
            tds_testserver_engine::Value::BigInt(n) => n,
            other => panic!("{other:?}"),
        };
        if MISSING_FILES.contains(&l.file.as_str()) {
            assert!(!dir.join(&l.file).exists(), "{} is there now: count it", l.file);
            assert_eq!(count, 0, "{}", l.table);
            continue;
        }
        let width = match scalar(
            &mut s,
            &format!(
                "SELECT COUNT(*) FROM sys.columns WHERE object_id = OBJECT_ID('{}')",
                l.table
            ),
        ) {
            tds_testserver_engine::Value::Int(n) => n as usize,
            other => panic!("{other:?}"),
        };
        let data = std::fs::read(dir.join(&l.file)).unwrap();
        let expected = file_rows(&data, &l.field_terminator, &l.row_terminator, width);
        assert!(expected > 0, "{}", l.file);
        assert_eq!(count, expected, "{} from {}", l.table, l.file);
        checked += 1;
    }
    assert_eq!(checked, 61);

    // The objects the script creates, by kind. Foreign keys: 90 on SQL Server with every data
    // file; the 15 of the eight batches that fail on the empty tables are missing.
    let (_, rows) = query(
        &mut s,
        "SELECT RTRIM(type), COUNT(*) FROM sys.objects GROUP BY type ORDER BY 1",
    );
    let kinds: Vec<(String, i32)> = rows
        .iter()
        .map(|r| match (&r[0], &r[1]) {
            (tds_testserver_engine::Value::String(t), tds_testserver_engine::Value::Int(n)) => {
                (t.clone(), *n)
            }
            other => panic!("{other:?}"),
        })
        .collect();
    let expected: Vec<(String, i32)> = [
        ("C", 89),
        ("D", 152),
        ("F", 75),
        ("FN", 10),
        ("P", 10),
        ("PK", 71),
        ("TF", 1),
        ("TR", 10),
        ("U", 71),
        ("UQ", 1),
        ("V", 20),
    ]
    .iter()
    .map(|(t, n)| (t.to_string(), *n))
    .collect();
    assert_eq!(kinds, expected);
    for (sql, n) in [
        // The ten DML triggers and the database's DDL trigger.
        ("SELECT COUNT(*) FROM sys.triggers", 11),
        ("SELECT COUNT(*) FROM sys.types WHERE is_user_defined = 1", 6),
        ("SELECT COUNT(*) FROM sys.xml_schema_collections", 6),
        ("SELECT COUNT(*) FROM sys.columns WHERE is_rowguidcol = 1", 29),
        ("SELECT COUNT(*) FROM sys.computed_columns", 10),
        (
            "SELECT COUNT(*) FROM sys.schemas WHERE schema_id BETWEEN 5 AND 16383",
            5,
        ),
    ] {
        assert_eq!(scalar(&mut s, sql), tds_testserver_engine::Value::Int(n), "{sql}");
    }

    // Every view can be selected from, but those that use xml methods (.nodes(), .value()),
    // which the test server does not have (error 195).
    const XML_VIEWS: &[&str] = &[
        "HumanResources.vJobCandidate",
        "HumanResources.vJobCandidateEducation",
        "HumanResources.vJobCandidateEmployment",
        "Person.vAdditionalContactInfo",
        "Production.vProductModelCatalogDescription",
        "Production.vProductModelInstructions",
        "Sales.vPersonDemographics",
        "Sales.vStoreWithDemographics",
    ];
    let (_, rows) = query(
        &mut s,
        "SELECT SCHEMA_NAME(schema_id) + '.' + name FROM sys.views ORDER BY 1",
    );
    assert_eq!(rows.len(), 20);
    for r in rows {
        let tds_testserver_engine::Value::String(view) = &r[0] else {
            panic!("{r:?}")
        };
        let errors = run(&mut s, &format!("SELECT COUNT(*) FROM {view}")).errors();
        if XML_VIEWS.contains(&view.as_str()) {
            assert_eq!(
                errors.iter().map(|e| e.number).collect::<Vec<_>>(),
                [195],
                "{view}"
            );
        } else {
            assert!(errors.is_empty(), "{view}: {errors:?}");
        }
    }
}
