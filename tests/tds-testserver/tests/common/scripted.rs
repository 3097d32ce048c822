//! A scripted backend: each batch is a tiny command (`ROWS n`, `FAIL n`, `MULTI`, ...), RPCs
//! echo their parameters, and bulk loads are recorded, so the tests can check the wire layer
//! byte for byte against what tiberius sees.
#![allow(clippy::unwrap_used, dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tds_testserver::backend::{Backend, Connector};
use tds_testserver::engine::{
    ColumnMeta, Done, EnvChange, Interrupt, Param, ResultSink, SqlError, SqlType, StatementKind,
    TransactionRequest, Value,
};

#[derive(Default)]
pub struct Shared {
    pub bulk_columns: Mutex<Vec<ColumnMeta>>,
    pub bulk_rows: Mutex<Vec<Vec<Value>>>,
    pub bulk_finished: AtomicU64,
    pub bulk_aborted: AtomicU64,
    pub cancelled: AtomicU64,
    pub rpc_params: Mutex<Vec<Param>>,
    pub batches: Mutex<Vec<String>>,
}

pub struct ScriptedConnector(pub Arc<Shared>);

impl Connector for ScriptedConnector {
    fn connect(&self, database: Option<&str>) -> Result<Box<dyn Backend>, SqlError> {
        match database {
            Some(db) if db != "master" && db != "shop" => Err(SqlError::new(
                4060,
                11,
                format!("Cannot open database \"{db}\" requested by the login. The login failed."),
            )),
            _ => Ok(Box::new(Scripted {
                shared: Arc::clone(&self.0),
                database: database.unwrap_or("master").to_string(),
                tran: None,
                next_tran: 1,
                bulk_count: 0,
            })),
        }
    }
}

pub struct Scripted {
    shared: Arc<Shared>,
    database: String,
    tran: Option<u64>,
    next_tran: u64,
    bulk_count: u64,
}

fn col(name: &str, ty: SqlType, nullable: bool) -> ColumnMeta {
    ColumnMeta {
        nullable,
        updateable: true,
        ..ColumnMeta::expr(name, ty)
    }
}

/// The 10-column mixed-type table used for streaming tests and the benchmark.
pub fn mixed_columns() -> Vec<ColumnMeta> {
    vec![
        col("id", SqlType::Int, false),
        col("name", SqlType::NVarChar { len: Some(50) }, false),
        col(
            "amount",
            SqlType::Decimal {
                precision: 18,
                scale: 2,
            },
            true,
        ),
        col("created", SqlType::DateTime2 { scale: 7 }, true),
        col("flag", SqlType::Bit, false),
        col("qty", SqlType::BigInt, true),
        col("price", SqlType::Float, true),
        col("code", SqlType::VarChar { len: Some(10) }, true),
        col("guid", SqlType::UniqueIdentifier, true),
        col("note", SqlType::NVarChar { len: Some(200) }, true),
    ]
}

pub fn mixed_row(i: u64) -> Vec<Value> {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&i.to_be_bytes());
    vec![
        Value::Int(i as i32),
        Value::String(format!("customer {i}")),
        Value::Decimal {
            mantissa: i128::from(i) * 101,
            scale: 2,
        },
        Value::DateTime2 {
            days: 738_000 + (i % 1000) as u32,
            time: i % 864_000_000_000,
        },
        Value::Bit(i.is_multiple_of(2)),
        Value::BigInt(i as i64 * 1_000_003),
        Value::Float(i as f64 / 7.0),
        Value::String(format!("C{:05}", i % 100_000)),
        Value::Guid(g),
        if i.is_multiple_of(4) {
            Value::Null
        } else {
            Value::String(format!("note for row {i}, with some text"))
        },
    ]
}

/// One column of every type, with a value at an edge of its range.
pub fn every_type() -> Vec<(ColumnMeta, Value)> {
    let g = [
        0x6F, 0x96, 0x19, 0xFF, 0x8B, 0x86, 0xD0, 0x11, 0xB4, 0x2D, 0x00, 0xC0, 0x4F, 0xC9, 0x64, 0xFF,
    ];
    vec![
        (col("bit", SqlType::Bit, false), Value::Bit(true)),
        (col("tinyint", SqlType::TinyInt, false), Value::TinyInt(255)),
        (
            col("smallint", SqlType::SmallInt, true),
            Value::SmallInt(i16::MIN),
        ),
        (col("int", SqlType::Int, false), Value::Int(i32::MIN)),
        (col("bigint", SqlType::BigInt, true), Value::BigInt(i64::MAX)),
        (col("real", SqlType::Real, false), Value::Real(-3.4e38)),
        (
            col("float", SqlType::Float, true),
            Value::Float(f64::MIN_POSITIVE),
        ),
        (col("money", SqlType::Money, false), Value::Money(-123_450_000)),
        (
            col("smallmoney", SqlType::SmallMoney, true),
            Value::Money(2_147_480_000),
        ),
        (
            col(
                "decimal",
                SqlType::Decimal {
                    precision: 38,
                    scale: 10,
                },
                true,
            ),
            Value::Decimal {
                mantissa: 10i128.pow(38) - 1,
                scale: 10,
            },
        ),
        (
            col(
                "numeric",
                SqlType::Numeric {
                    precision: 9,
                    scale: 2,
                },
                false,
            ),
            Value::Decimal {
                mantissa: -1,
                scale: 2,
            },
        ),
        (col("date", SqlType::Date, true), Value::Date(3_652_058)),
        (
            col("time", SqlType::Time { scale: 7 }, true),
            Value::Time(863_999_999_999),
        ),
        (
            col("datetime", SqlType::DateTime, false),
            Value::DateTime {
                days: -53690,
                ticks: 0,
            },
        ),
        (
            col("smalldatetime", SqlType::SmallDateTime, true),
            Value::SmallDateTime {
                days: 65535,
                minutes: 1439,
            },
        ),
        (
            col("datetime2", SqlType::DateTime2 { scale: 3 }, true),
            Value::DateTime2 {
                days: 0,
                time: 12_345_670_000,
            },
        ),
        (
            col("datetimeoffset", SqlType::DateTimeOffset { scale: 7 }, true),
            Value::DateTimeOffset {
                days: 738_000,
                time: 1,
                offset_minutes: -840,
            },
        ),
        (col("guid", SqlType::UniqueIdentifier, true), Value::Guid(g)),
        (
            col("nvarchar", SqlType::NVarChar { len: Some(50) }, true),
            Value::String("ünï 😀 €".into()),
        ),
        (
            col("varchar", SqlType::VarChar { len: Some(20) }, true),
            Value::String("café €".into()),
        ),
        (
            col("nchar", SqlType::NChar { len: 4 }, true),
            Value::String("ab  ".into()),
        ),
        (
            col("char", SqlType::Char { len: 3 }, true),
            Value::String("xyz".into()),
        ),
        (
            col("nvarcharmax", SqlType::NVarChar { len: None }, true),
            Value::String("ß".repeat(5000)),
        ),
        (
            col("varcharmax", SqlType::VarChar { len: None }, true),
            Value::String(String::new()),
        ),
        (
            col("varbinary", SqlType::VarBinary { len: Some(16) }, true),
            Value::Binary(vec![0, 1, 0xFF]),
        ),
        (
            col("binary", SqlType::Binary { len: 4 }, true),
            Value::Binary(vec![1, 2, 3, 4]),
        ),
        (
            col("varbinarymax", SqlType::VarBinary { len: None }, true),
            Value::Binary(vec![0xAB; 60_000]),
        ),
        (col("text", SqlType::Text, true), Value::String("old text".into())),
        (
            col("ntext", SqlType::NText, true),
            Value::String("ntext ✓".into()),
        ),
        (col("image", SqlType::Image, true), Value::Binary(vec![9; 5])),
        (
            col("xml", SqlType::Xml, true),
            Value::String("<a b=\"1\">ü</a>".into()),
        ),
        (
            ColumnMeta {
                updateable: false,
                ..col("rowversion", SqlType::RowVersion, false)
            },
            Value::Binary(vec![0, 0, 0, 0, 0, 0, 0x07, 0xD1]),
        ),
        (col("variant", SqlType::SqlVariant, true), Value::Int(42)),
    ]
}

fn done(
    sink: &mut dyn ResultSink,
    kind: StatementKind,
    rows: Option<u64>,
    in_tran: bool,
) -> Result<(), Interrupt> {
    sink.done(Done {
        kind,
        rows,
        error: false,
        in_transaction: in_tran,
    })
}

impl Scripted {
    fn stream_rows(&mut self, n: u64, sink: &mut dyn ResultSink) -> Result<(), Interrupt> {
        sink.columns(&mixed_columns())?;
        for i in 0..n {
            if let Err(e) = sink.row(&mixed_row(i)) {
                if matches!(e, Interrupt::Cancelled) {
                    self.shared.cancelled.fetch_add(1, Ordering::SeqCst);
                }
                return Err(e);
            }
        }
        done(sink, StatementKind::Select, Some(n), self.tran.is_some())
    }

    fn begin(&mut self, sink: &mut dyn ResultSink) -> Result<(), Interrupt> {
        let d = self.next_tran;
        self.next_tran += 1;
        self.tran = Some(d);
        sink.env_change(EnvChange::BeginTransaction(d))
    }

    /// Ends the transaction; `false` when there was none (the error is already sent).
    fn end(&mut self, commit: bool, sink: &mut dyn ResultSink) -> Result<bool, Interrupt> {
        match self.tran.take() {
            Some(d) if commit => sink.env_change(EnvChange::CommitTransaction(d)).map(|_| true),
            Some(d) => sink.env_change(EnvChange::RollbackTransaction(d)).map(|_| true),
            None => {
                sink.error(&SqlError::new(
                    3902,
                    16,
                    "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION.",
                ))?;
                sink.done(Done {
                    kind: StatementKind::Other,
                    rows: None,
                    error: true,
                    in_transaction: false,
                })?;
                Ok(false)
            }
        }
    }
}

impl Backend for Scripted {
    fn database(&self) -> &str {
        &self.database
    }

    fn execute_batch(&mut self, sql: &str, sink: &mut dyn ResultSink) -> Result<(), Interrupt> {
        self.shared.batches.lock().unwrap().push(sql.to_string());
        let words: Vec<&str> = sql.split_whitespace().collect();
        let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
        let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
        match upper.as_slice() {
            ["ROWS", n] => self.stream_rows(n.parse().unwrap(), sink),
            ["FAIL", n] => {
                sink.error(&SqlError::new(
                    n.parse().unwrap(),
                    16,
                    format!("Scripted failure {n}."),
                ))?;
                sink.done(Done {
                    kind: StatementKind::Other,
                    rows: None,
                    error: true,
                    in_transaction: false,
                })
            }
            ["MULTI"] => {
                done(sink, StatementKind::Insert, Some(3), false)?;
                done(sink, StatementKind::Update, Some(2), false)?;
                done(sink, StatementKind::Other, None, false)?;
                sink.info(5701, "Changed something.")?;
                done(sink, StatementKind::Delete, Some(0), false)
            }
            ["ROWS_THEN_FAIL"] => {
                sink.columns(&mixed_columns())?;
                sink.row(&mixed_row(1))?;
                done(sink, StatementKind::Select, Some(1), false)?;
                sink.error(&SqlError::new(
                    547,
                    16,
                    "The INSERT statement conflicted with a constraint.",
                ))?;
                sink.done(Done {
                    kind: StatementKind::Insert,
                    rows: None,
                    error: true,
                    in_transaction: false,
                })
            }
            ["TYPES"] => {
                let (cols, vals): (Vec<_>, Vec<_>) = every_type().into_iter().unzip();
                sink.columns(&cols)?;
                sink.row(&vals)?;
                let nulls: Vec<Value> = cols.iter().map(|_| Value::Null).collect();
                sink.row(&nulls)?;
                done(sink, StatementKind::Select, Some(2), false)
            }
            ["BAD_VALUE"] => {
                sink.columns(&[col("t", SqlType::TinyInt, true)])?;
                sink.row(&[Value::Int(1000)])?;
                sink.row(&[Value::Int(7)])?;
                done(sink, StatementKind::Select, Some(2), false)
            }
            ["USE", db] => {
                let old = std::mem::replace(&mut self.database, db.to_ascii_lowercase());
                sink.env_change(EnvChange::Database {
                    new: self.database.clone(),
                    old,
                })?;
                sink.info(5701, &format!("Changed database context to '{}'.", self.database))?;
                done(sink, StatementKind::Other, None, false)
            }
            ["BEGIN", "TRAN"] | ["BEGIN", "TRANSACTION"] => {
                self.begin(sink)?;
                done(sink, StatementKind::Other, None, true)
            }
            ["COMMIT"] | ["COMMIT", "TRAN"] => {
                if self.end(true, sink)? {
                    done(sink, StatementKind::Other, None, false)
                } else {
                    Ok(())
                }
            }
            ["ROLLBACK"] | ["ROLLBACK", "TRAN"] => {
                if self.end(false, sink)? {
                    done(sink, StatementKind::Other, None, false)
                } else {
                    Ok(())
                }
            }
            ["@@TRANCOUNT"] => {
                sink.columns(&[ColumnMeta {
                    nullable: false,
                    ..ColumnMeta::expr("", SqlType::Int)
                }])?;
                sink.row(&[Value::Int(i32::from(self.tran.is_some()))])?;
                done(sink, StatementKind::Select, Some(1), self.tran.is_some())
            }
            ["SELECT", "TOP", "0", ..] if sql.to_ascii_lowercase().contains("mixed") => {
                sink.columns(&mixed_columns())?;
                done(sink, StatementKind::Select, Some(0), false)
            }
            ["SELECT", "TOP", "0", ..] => {
                let mut cols: Vec<ColumnMeta> = every_type()
                    .into_iter()
                    .map(|(c, _)| c)
                    // tiberius cannot bulk-load image or sql_variant.
                    .filter(|c| !matches!(c.ty, SqlType::Image | SqlType::SqlVariant))
                    .collect();
                cols.insert(
                    0,
                    ColumnMeta {
                        identity: true,
                        updateable: false,
                        ..col("id", SqlType::Int, false)
                    },
                );
                sink.columns(&cols)?;
                done(sink, StatementKind::Select, Some(0), false)
            }
            ["INSERT", "BULK", ..] => done(sink, StatementKind::Other, None, false),
            _ => {
                sink.error(&SqlError::new(
                    102,
                    15,
                    format!("Incorrect syntax near '{}'.", words.first().unwrap_or(&"")),
                ))?;
                sink.done(Done {
                    kind: StatementKind::Other,
                    rows: None,
                    error: true,
                    in_transaction: false,
                })
            }
        }
    }

    fn execute_rpc(
        &mut self,
        sql: &str,
        params: &[Param],
        sink: &mut dyn ResultSink,
    ) -> Result<(), Interrupt> {
        self.shared
            .rpc_params
            .lock()
            .unwrap()
            .extend(params.iter().cloned());
        if sql.starts_with("SELECT @P") {
            let cols: Vec<ColumnMeta> = params.iter().map(|p| ColumnMeta::expr("", p.ty)).collect();
            sink.columns(&cols)?;
            let row: Vec<Value> = params.iter().map(|p| p.value.clone()).collect();
            sink.row(&row)?;
            done(sink, StatementKind::Select, Some(1), false)
        } else {
            self.execute_batch(sql, sink)
        }
    }

    fn transaction(
        &mut self,
        request: TransactionRequest,
        sink: &mut dyn ResultSink,
    ) -> Result<(), Interrupt> {
        match request {
            TransactionRequest::Begin { .. } => self.begin(sink)?,
            TransactionRequest::Commit { begin_new } => {
                if !self.end(true, sink)? {
                    return Ok(());
                }
                if begin_new {
                    self.begin(sink)?;
                }
            }
            TransactionRequest::Rollback { begin_new } => {
                if !self.end(false, sink)? {
                    return Ok(());
                }
                if begin_new {
                    self.begin(sink)?;
                }
            }
            TransactionRequest::Save { .. } => {}
        }
        done(sink, StatementKind::Other, None, self.tran.is_some())
    }

    fn bulk_start(&mut self, columns: &[ColumnMeta]) -> Result<(), SqlError> {
        *self.shared.bulk_columns.lock().unwrap() = columns.to_vec();
        self.shared.bulk_rows.lock().unwrap().clear();
        self.bulk_count = 0;
        Ok(())
    }

    fn bulk_row(&mut self, row: &[Value]) {
        self.bulk_count += 1;
        let mut rows = self.shared.bulk_rows.lock().unwrap();
        // Keep memory flat for the large loads in the benchmark.
        if rows.len() < 10_000 {
            rows.push(row.to_vec());
        }
    }

    fn bulk_finish(&mut self, sink: &mut dyn ResultSink) -> Result<(), Interrupt> {
        self.shared.bulk_finished.fetch_add(1, Ordering::SeqCst);
        done(sink, StatementKind::Insert, Some(self.bulk_count), false)
    }

    fn bulk_abort(&mut self) {
        self.shared.bulk_aborted.fetch_add(1, Ordering::SeqCst);
    }
}
