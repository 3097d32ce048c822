//! SQL Server loader: `CREATE TABLE` with the clustered primary key, then tiberius bulk load
//! (`INSERT BULK ... WITH (TABLOCK)`, identity values kept) fed by a generator thread, in
//! batches of `batch_rows` rows per `INSERT BULK`.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Instant;

use chrono::NaiveDateTime;
use tiberius::{Client, ColumnData, SqlBulkCopyOption, TokenRow};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

use super::{ROWS_PER_BATCH, TableReport};
use crate::stackoverflow::{Column, Dataset, Row, SqlType, Table, Value};

pub type MssqlClient = Client<Compat<TcpStream>>;

#[derive(Debug, thiserror::Error)]
pub enum MssqlLoadError {
    #[error("SQL Server: {context}")]
    Server {
        context: String,
        #[source]
        source: tiberius::error::Error,
    },
    #[error("connecting to SQL Server at {addr}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("generator thread for {0} failed")]
    Generator(Table),
    #[error("{table}: bulk load reported {loaded} rows, expected {expected}")]
    RowCount {
        table: Table,
        loaded: u64,
        expected: u64,
    },
}

fn server_err(context: impl Into<String>) -> impl FnOnce(tiberius::error::Error) -> MssqlLoadError {
    let context = context.into();
    move |source| MssqlLoadError::Server { context, source }
}

/// Connection settings. The password is never printed (`Debug` hides it).
#[derive(Clone)]
pub struct MssqlTarget {
    pub host: String,
    pub port: u16,
    pub database: String,
    pub user: String,
    pub password: String,
    /// `EncryptionLevel::NotSupported` instead of TLS.
    pub no_tls: bool,
    pub trust_cert: bool,
}

impl std::fmt::Debug for MssqlTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MssqlTarget")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("database", &self.database)
            .field("user", &self.user)
            .field("no_tls", &self.no_tls)
            .finish_non_exhaustive()
    }
}

impl MssqlTarget {
    fn config(&self, database: &str) -> tiberius::Config {
        let mut config = tiberius::Config::new();
        config.host(&self.host);
        config.port(self.port);
        config.database(database);
        config.authentication(tiberius::AuthMethod::sql_server(&self.user, &self.password));
        config.application_name("mssql-pg-bench");
        // The server may grant less; tiberius adopts whatever the login response says.
        config.packet_size(32767);
        // The bench's own statements (a load, one UPDATE of millions of rows) take what they
        // take: they are measured, not bounded.
        config.command_timeout(None);
        if self.no_tls {
            config.encryption(tiberius::EncryptionLevel::NotSupported);
        }
        if self.trust_cert {
            config.trust_cert();
        }
        config
    }

    async fn connect_to(&self, database: &str) -> Result<MssqlClient, MssqlLoadError> {
        let addr = format!("{}:{}", self.host, self.port);
        let tcp = TcpStream::connect(&addr)
            .await
            .map_err(|source| MssqlLoadError::Connect {
                addr: addr.clone(),
                source,
            })?;
        // Nagle would hold back the last partial packet of every bulk batch.
        tcp.set_nodelay(true).map_err(|source| MssqlLoadError::Connect {
            addr: addr.clone(),
            source,
        })?;
        Client::connect(self.config(database), tcp.compat_write())
            .await
            .map_err(server_err(format!("logging in to {addr} as {}", self.user)))
    }

    pub async fn connect(&self) -> Result<MssqlClient, MssqlLoadError> {
        self.connect_to(&self.database).await
    }

    /// Creates the database from `master` when it does not exist yet.
    pub async fn create_database(&self) -> Result<(), MssqlLoadError> {
        let mut client = self.connect_to("master").await?;
        let name = self.database.replace('\'', "''");
        let sql = format!(
            "IF DB_ID(N'{name}') IS NULL CREATE DATABASE {}",
            quote(&self.database)
        );
        client
            .simple_query(sql)
            .await
            .map_err(server_err("CREATE DATABASE"))?
            .into_results()
            .await
            .map_err(server_err("CREATE DATABASE"))?;
        Ok(())
    }
}

pub fn quote(name: &str) -> String {
    format!("[{}]", name.replace(']', "]]"))
}

pub fn table_name(table: Table) -> String {
    format!("[dbo].{}", quote(table.name()))
}

/// `DROP TABLE IF EXISTS` + `CREATE TABLE` as in StackOverflow2010: identity id, clustered PK.
pub fn create_table_sql(table: Table) -> String {
    let name = table_name(table);
    let mut sql = format!("DROP TABLE IF EXISTS {name};\nCREATE TABLE {name} (");
    for (i, col) in table.columns().iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(sql, "{sep}\n  {} {}", quote(col.name), col.ty.mssql());
        if i == 0 {
            sql.push_str(" IDENTITY(1,1)");
        }
        sql.push_str(if col.nullable { " NULL" } else { " NOT NULL" });
    }
    let _ = write!(
        sql,
        ",\n  CONSTRAINT {} PRIMARY KEY CLUSTERED ([Id])\n)",
        quote(&format!("PK_{}", table.name()))
    );
    sql
}

pub fn foreign_keys_sql(tables: &[Table]) -> Vec<String> {
    let mut out = Vec::new();
    for table in tables {
        for fk in table.foreign_keys() {
            if tables.contains(&fk.references) {
                out.push(format!(
                    "ALTER TABLE {} ADD CONSTRAINT {} FOREIGN KEY ({}) REFERENCES {} ([Id])",
                    table_name(*table),
                    quote(&format!("FK_{}_{}", table.name(), fk.column)),
                    quote(fk.column),
                    table_name(fk.references),
                ));
            }
        }
    }
    out
}

/// Drops every foreign key this loader may have created earlier (any table), so that the
/// tables can be dropped and recreated: SQL Server refuses to drop a referenced table.
pub fn drop_foreign_keys_sql() -> Vec<String> {
    let mut out = Vec::new();
    for table in Table::ALL {
        for fk in table.foreign_keys() {
            let name = format!("FK_{}_{}", table.name(), fk.column);
            // Guarded by the table, not the constraint: the TDS test server's OBJECT_ID does
            // not know foreign keys (and sys.foreign_keys lists none), while DROP CONSTRAINT
            // IF EXISTS (SQL Server 2016+) works on both.
            out.push(format!(
                "IF OBJECT_ID(N'{}', N'U') IS NOT NULL ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}",
                table_name(table).replace('\'', "''"),
                table_name(table),
                quote(&name),
            ));
        }
    }
    out
}

/// Days since 1900-01-01 and 1/300 s ticks: the `datetime` wire form. Generated moments are
/// multiples of 10 ms (3 ticks), so this is exact.
pub fn datetime_parts(dt: &NaiveDateTime) -> (i32, u32) {
    const DAY_MS: i64 = 86_400_000;
    // 1900-01-01 is 25567 days before 1970-01-01.
    let ms = dt.and_utc().timestamp_millis();
    let days = ms.div_euclid(DAY_MS) + 25_567;
    let ticks = ms.rem_euclid(DAY_MS) * 3 / 10;
    (days as i32, ticks as u32)
}

fn cell(value: Value, column: &Column) -> ColumnData<'static> {
    match (value, column.ty) {
        (Value::Int(v), _) => ColumnData::I32(Some(v)),
        (Value::Text(s), _) => ColumnData::String(Some(Cow::Owned(s))),
        (Value::DateTime(dt), _) => {
            let (days, ticks) = datetime_parts(&dt);
            ColumnData::DateTime(Some(tiberius::time::DateTime::new(days, ticks)))
        }
        (Value::Null, SqlType::Int) => ColumnData::I32(None),
        (Value::Null, SqlType::NVarChar(_) | SqlType::NVarCharMax) => ColumnData::String(None),
        (Value::Null, SqlType::DateTime) => ColumnData::DateTime(None),
    }
}

pub fn token_row(row: Row, columns: &[Column]) -> TokenRow<'static> {
    let mut out = TokenRow::with_capacity(columns.len());
    for (value, column) in row.into_iter().zip(columns) {
        out.push(cell(value, column));
    }
    out
}

/// Creates `table` and bulk-loads the dataset's rows, `batch_rows` rows per `INSERT BULK`.
pub async fn load_table(
    client: &mut MssqlClient,
    ds: &Dataset,
    table: Table,
    batch_rows: u64,
) -> Result<TableReport, MssqlLoadError> {
    let started = Instant::now();
    let expected = ds.rows_of(table);
    client
        .simple_query(create_table_sql(table))
        .await
        .map_err(server_err(format!("creating {table}")))?
        .into_results()
        .await
        .map_err(server_err(format!("creating {table}")))?;

    let (tx, mut rx) = mpsc::channel::<Vec<Row>>(16);
    let dataset = *ds;
    let producer = std::thread::spawn(move || {
        let mut batch = Vec::with_capacity(ROWS_PER_BATCH);
        for row in dataset.rows(table) {
            batch.push(row);
            if batch.len() == ROWS_PER_BATCH
                && tx
                    .blocking_send(std::mem::replace(&mut batch, Vec::with_capacity(ROWS_PER_BATCH)))
                    .is_err()
            {
                return;
            }
        }
        if !batch.is_empty() {
            let _ = tx.blocking_send(batch);
        }
    });

    let result = bulk_batches(client, table, &mut rx, batch_rows.max(1)).await;
    drop(rx);
    producer.join().map_err(|_| MssqlLoadError::Generator(table))?;
    let loaded = result?;
    if loaded != expected {
        return Err(MssqlLoadError::RowCount {
            table,
            loaded,
            expected,
        });
    }
    Ok(TableReport {
        table,
        rows: loaded,
        elapsed: started.elapsed(),
    })
}

async fn bulk_batches(
    client: &mut MssqlClient,
    table: Table,
    rx: &mut mpsc::Receiver<Vec<Row>>,
    batch_rows: u64,
) -> Result<u64, MssqlLoadError> {
    let name = table_name(table);
    let columns = table.columns();
    let options = SqlBulkCopyOption::KeepIdentity | SqlBulkCopyOption::TableLock;
    let mut total = 0u64;
    let mut pending = rx.recv().await;
    while pending.is_some() {
        let context = || format!("bulk load into {table} after {total} rows");
        let mut req = client
            .bulk_insert_with_options(&name, &["*"], options, &[])
            .await
            .map_err(server_err(context()))?;
        let mut in_batch = 0u64;
        while let Some(rows) = pending.take() {
            in_batch += rows.len() as u64;
            for row in rows {
                req.send(token_row(row, columns))
                    .await
                    .map_err(server_err(context()))?;
            }
            pending = rx.recv().await;
            if in_batch >= batch_rows {
                break;
            }
        }
        let done = req.finalize().await.map_err(server_err(context()))?;
        total += done.total();
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    #[test]
    fn datetime_wire_parts() {
        let dt = NaiveDate::from_ymd_opt(1900, 1, 2).and_then(|d| d.and_hms_milli_opt(0, 0, 1, 10));
        let Some(dt) = dt else { panic!("valid date") };
        assert_eq!(datetime_parts(&dt), (1, 303));
    }

    #[test]
    fn create_table_text() {
        assert_eq!(
            create_table_sql(Table::LinkTypes),
            "DROP TABLE IF EXISTS [dbo].[LinkTypes];\nCREATE TABLE [dbo].[LinkTypes] (\n  [Id] int IDENTITY(1,1) NOT NULL,\n  \
             [Type] nvarchar(50) NOT NULL,\n  CONSTRAINT [PK_LinkTypes] PRIMARY KEY CLUSTERED ([Id])\n)"
        );
    }
}
