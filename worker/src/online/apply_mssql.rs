//! Applying a batch to SQL Server: per table, the row images are loaded through the TDS bulk
//! path (encoded exactly as the copy encodes rows) into a staging table, then one `MERGE` deletes,
//! updates and inserts by primary key; the state row's position moves in the same transaction,
//! under the stream's epoch.

use super::batch::{Drained, Op};
use super::capture_pg::{PgConverter, PgRow};
use super::{Apply, Control, OnlineError, Progress, Record, state_mssql};
use crate::copy::checkpoint::SCHEMA;
use crate::mssql::bulk::bulk_options;
use crate::mssql::connect::TdsClient;
use crate::mssql::ddl;
use crate::pg::read::decode_field;
use crate::plan::pg_to_mssql::PgToMssqlTablePlan;
use crate::schema::mssql_to_pg_types::quote_mssql;
use crate::schema::pg_to_mssql_types::Decode;
use bytes::BytesMut;
use tiberius::{BulkRowEncoder, ColumnData};

/// The operation column of the staging tables: `U` (the row holds these values) or `D`.
const OP_COLUMN: &str = "[_mssqlpg_op]";

/// A table's staging table and statements.
struct StageTable {
    /// The source table, for messages.
    source: String,
    target: String,
    stage: String,
    encoder: BulkRowEncoder,
    merge: String,
    decodes: Vec<Decode>,
    /// Per plan column: loaded (not computed by the target).
    loaded: Vec<bool>,
    names: Vec<String>,
    key: Vec<usize>,
}

/// The SQL Server side of a PostgreSQL -> SQL Server stream.
pub struct MssqlApply {
    ms: TdsClient,
    converter: PgConverter,
    tables: Vec<StageTable>,
    migration: String,
    epoch: i64,
}

fn target(what: &'static str) -> impl FnOnce(tiberius::error::Error) -> OnlineError {
    OnlineError::target(what)
}

async fn batch(ms: &mut TdsClient, what: &'static str, sql: &str) -> Result<(), OnlineError> {
    ms.simple_query(sql)
        .await
        .map_err(target(what))?
        .into_results()
        .await
        .map_err(target(what))?;
    Ok(())
}

/// The staging table of plan table `t`: its loaded columns, all nullable, after the operation.
fn stage_ddl(t: &PgToMssqlTablePlan, stage: &str) -> String {
    let cols = t
        .columns
        .iter()
        .filter(|c| c.computed.is_none())
        .map(|c| format!("{} {} NULL", quote_mssql(&c.target_name), c.ms_type))
        .collect::<Vec<_>>()
        .join(", ");
    format!("DROP TABLE IF EXISTS {stage}; CREATE TABLE {stage} ({OP_COLUMN} nchar(1) NOT NULL, {cols})")
}

/// The batch's `MERGE` of plan table `t` from `stage`, then the staging table emptied. Keys
/// match by value and, for text, by their exact characters too: under a case-insensitive
/// collation `a` would otherwise match the target's `A`, and overwrite it.
pub fn merge_sql(t: &PgToMssqlTablePlan, stage: &str, key: &[usize], identity: bool) -> String {
    let q = ddl::qualified(t);
    let on = key
        .iter()
        .map(|&k| {
            let c = quote_mssql(&t.columns[k].target_name);
            match t.columns[k].decode {
                Decode::Text { .. } => {
                    format!("t.{c} = s.{c} AND CAST(t.{c} AS varbinary(max)) = CAST(s.{c} AS varbinary(max))")
                }
                _ => format!("t.{c} = s.{c}"),
            }
        })
        .collect::<Vec<_>>()
        .join(" AND ");
    let loaded: Vec<(usize, String)> = t
        .columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.computed.is_none())
        .map(|(i, c)| (i, quote_mssql(&c.target_name)))
        .collect();
    // SQL Server cannot update an identity column; a key never changes in place here.
    let set = loaded
        .iter()
        .filter(|(i, _)| !(key.contains(i) || identity && t.columns[*i].identity))
        .map(|(_, c)| format!("{c} = s.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let cols = loaded.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>();
    let has_identity = identity && t.columns.iter().any(|c| c.identity);
    let mut sql = String::new();
    if has_identity {
        sql.push_str(&format!("SET IDENTITY_INSERT {q} ON; "));
    }
    sql.push_str(&format!(
        "MERGE INTO {q} AS t USING {stage} AS s ON {on} WHEN MATCHED AND s.{OP_COLUMN} = N'D' THEN DELETE"
    ));
    if !set.is_empty() {
        sql.push_str(&format!(" WHEN MATCHED THEN UPDATE SET {set}"));
    }
    sql.push_str(&format!(
        " WHEN NOT MATCHED AND s.{OP_COLUMN} = N'U' THEN INSERT ({}) VALUES ({});",
        cols.join(", "),
        cols.iter()
            .map(|c| format!("s.{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if has_identity {
        sql.push_str(&format!(" SET IDENTITY_INSERT {q} OFF;"));
    }
    sql.push_str(&format!(" DELETE FROM {stage};"));
    sql
}

impl MssqlApply {
    /// Creates the staging tables (afresh) and their encoders; `epoch` is the stream's, from
    /// [`state_mssql::claim`].
    pub async fn new(
        mut ms: TdsClient,
        converter: PgConverter,
        plan: &[PgToMssqlTablePlan],
        migration: &str,
        epoch: i64,
        identity: bool,
    ) -> Result<Self, OnlineError> {
        let mut tables = Vec::with_capacity(plan.len());
        for (i, t) in plan.iter().enumerate() {
            let captured = super::capture_pg::CaptureTable::of(t)?;
            let stage = format!("[{SCHEMA}].[online_{}_{i}]", t.target_name.replace(']', "]]"));
            batch(&mut ms, "create a staging table", &stage_ddl(t, &stage)).await?;
            let mut columns = vec![OP_COLUMN.to_string()];
            columns.extend(
                t.columns
                    .iter()
                    .filter(|c| c.computed.is_none())
                    .map(|c| quote_mssql(&c.target_name)),
            );
            let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
            let encoder = ms
                .bulk_row_encoder(&stage, &cols, bulk_options(false))
                .await
                .map_err(target("read a staging table's columns"))?;
            tables.push(StageTable {
                source: t.source.qualified(),
                target: ddl::qualified(t),
                merge: merge_sql(t, &stage, &captured.key, identity),
                stage,
                encoder,
                decodes: t.columns.iter().map(|c| c.decode).collect(),
                loaded: t.columns.iter().map(|c| c.computed.is_none()).collect(),
                names: t.columns.iter().map(|c| c.source.name.clone()).collect(),
                key: captured.key,
            });
        }
        Ok(MssqlApply {
            ms,
            converter,
            tables,
            migration: migration.to_string(),
            epoch,
        })
    }

    /// Encodes table `i`'s images as bulk rows of its staging table.
    async fn encode(
        &mut self,
        i: usize,
        rows: &std::collections::HashMap<Vec<u8>, Op<PgRow>>,
    ) -> Result<(BytesMut, usize), OnlineError> {
        let st = &self.tables[i];
        let mut buf = BytesMut::new();
        let n = self
            .converter
            .convert(i, rows.values(), |delete, fields| {
                encode_row(st, delete, fields, &mut buf)
            })
            .await?;
        Ok((buf, n))
    }
}

fn encode_row(
    st: &StageTable,
    delete: bool,
    fields: &[Option<&[u8]>],
    buf: &mut BytesMut,
) -> Result<(), OnlineError> {
    let value_error = |column: usize, message: String| OnlineError::Value {
        table: st.source.clone(),
        key: key_text(st, fields),
        column: st.names.get(column).cloned().unwrap_or_default(),
        message,
    };
    if fields.len() != st.decodes.len() {
        return Err(value_error(
            0,
            "the conversion returned a different column count".into(),
        ));
    }
    let mut values = Vec::with_capacity(fields.len() + 1);
    values.push(ColumnData::String(Some(if delete { "D" } else { "U" }.into())));
    for (i, (f, d)) in fields.iter().zip(&st.decodes).enumerate() {
        if !st.loaded[i] {
            continue;
        }
        values.push(decode_field(*d, *f).map_err(|m| value_error(i, m))?);
    }
    st.encoder.encode_row(values, buf).map_err(|e| {
        // The encoder counts the operation column first.
        let loaded: Vec<usize> = (0..st.loaded.len()).filter(|&i| st.loaded[i]).collect();
        let column = e
            .column
            .checked_sub(1)
            .and_then(|c| loaded.get(c).copied())
            .unwrap_or(0);
        value_error(column, e.error.to_string())
    })
}

/// The key of a converted row, for an error message.
fn key_text(st: &StageTable, fields: &[Option<&[u8]>]) -> String {
    st.key
        .iter()
        .map(|&k| {
            let v = fields
                .get(k)
                .copied()
                .flatten()
                .and_then(|f| decode_field(st.decodes[k], Some(f)).ok())
                .map_or_else(|| "?".to_string(), |v| format!("{v:?}"));
            format!("{}={v}", st.names[k])
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Apply<PgRow> for MssqlApply {
    async fn apply(&mut self, drained: Drained<PgRow>, progress: &Progress) -> Result<(), OnlineError> {
        // Converted before the target's transaction opens, so it stays short.
        let mut loads = Vec::with_capacity(drained.tables.len());
        for (i, changes) in &drained.tables {
            let (buf, rows) = self.encode(*i, &changes.rows).await?;
            loads.push((*i, changes.truncate, buf, rows));
        }
        batch(&mut self.ms, "begin a batch", "BEGIN TRANSACTION").await?;
        // On an error the transaction stays open: the caller drops the connection, which rolls
        // it back.
        for (i, truncate, buf, rows) in loads {
            let st = &self.tables[i];
            if truncate {
                batch(
                    &mut self.ms,
                    "empty a table the source truncated",
                    &format!("DELETE FROM {}", st.target),
                )
                .await?;
            }
            if rows == 0 {
                continue;
            }
            let mut req = self
                .ms
                .bulk_insert_encoded(&st.stage, &st.encoder, bulk_options(false))
                .await
                .map_err(target("load a staging table"))?;
            req.send_encoded(&buf)
                .await
                .map_err(target("load a staging table"))?;
            req.finalize().await.map_err(target("load a staging table"))?;
            let merge = st.merge.clone();
            batch(&mut self.ms, "merge a batch into its table", &merge).await?;
        }
        state_mssql::advance(&mut self.ms, &self.migration, self.epoch, progress).await?;
        batch(&mut self.ms, "commit a batch", "COMMIT TRANSACTION").await
    }

    async fn control(&mut self) -> Result<Control, OnlineError> {
        state_mssql::control(&mut self.ms, &self.migration, self.epoch).await
    }

    async fn record(&mut self, record: &Record) -> Result<(), OnlineError> {
        state_mssql::record(&mut self.ms, &self.migration, self.epoch, record).await
    }

    fn drifted(&self) -> Vec<(usize, String)> {
        self.converter
            .drifted()
            .iter()
            .map(|(i, m)| (*i, m.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::pg_model::PgColumn;
    use crate::schema::pg_to_mssql_types::{MsType, map_column};

    fn column(
        name: &str,
        type_name: &str,
        identity: bool,
    ) -> crate::schema::pg_to_mssql_types::PgToMssqlColumn {
        let col = PgColumn {
            name: name.into(),
            type_name: type_name.into(),
            formatted: type_name.into(),
            type_kind: 'b',
            category: if type_name == "text" { 'S' } else { 'N' },
            length: None,
            precision: None,
            scale: None,
            nullable: true,
            identity,
            sequence: None,
            default: None,
            generated: None,
            enum_labels: Vec::new(),
            domain: None,
        };
        map_column(&col, None, &mut Vec::new()).unwrap()
    }

    #[test]
    fn the_merge_deletes_updates_and_inserts_by_exact_key() {
        let mut t = PgToMssqlTablePlan {
            source: crate::schema::pg_model::PgTable {
                schema: "public".into(),
                name: "t".into(),
                partitioned: false,
                columns: Vec::new(),
                primary_key: None,
                unique: Vec::new(),
                indexes: Vec::new(),
                foreign_keys: Vec::new(),
                checks: Vec::new(),
                row_count: 0,
                size_bytes: 0,
            },
            target_schema: "dbo".into(),
            target_name: "t".into(),
            columns: vec![
                column("code", "text", false),
                column("n", "int4", true),
                column("v", "text", false),
            ],
            key: None,
        };
        t.columns[0].ms_type = MsType::NVarChar { length: Some(20) };
        let sql = merge_sql(&t, "[_mssqlpg].[s]", &[0], true);
        assert!(
            sql.starts_with("SET IDENTITY_INSERT [dbo].[t] ON; MERGE INTO [dbo].[t] AS t"),
            "{sql}"
        );
        assert!(
            sql.contains("ON t.[code] = s.[code] AND CAST(t.[code] AS varbinary(max)) = CAST(s.[code] AS varbinary(max))"),
            "{sql}"
        );
        assert!(
            sql.contains("WHEN MATCHED AND s.[_mssqlpg_op] = N'D' THEN DELETE"),
            "{sql}"
        );
        // The identity column is inserted, never updated.
        assert!(
            sql.contains("WHEN MATCHED THEN UPDATE SET [v] = s.[v] WHEN NOT MATCHED"),
            "{sql}"
        );
        assert!(
            sql.contains("INSERT ([code], [n], [v]) VALUES (s.[code], s.[n], s.[v]);"),
            "{sql}"
        );
        assert!(
            sql.ends_with("SET IDENTITY_INSERT [dbo].[t] OFF; DELETE FROM [_mssqlpg].[s];"),
            "{sql}"
        );
    }
}
