//! Applying a batch to PostgreSQL: per table, the row images (already in the copy's binary COPY
//! form) are loaded by binary COPY into a temporary staging table with their operation, then one
//! `DELETE ... USING` removes the deleted keys and one `INSERT ... ON CONFLICT (key) DO UPDATE`
//! (the copy's upsert statement) writes the rest; the state row's position moves in the same
//! transaction, after the stream's fence ([`super::state_pg`]) is checked there.

use super::batch::{Drained, Op};
use super::capture_mssql::MsRow;
use super::{Apply, Control, OnlineError, Progress, Record, state::OnlineState, state_pg};
use crate::copy::binary::{write_header, write_trailer};
use crate::pg::ddl::{copied_columns, qualified, upsert_merge_from};
use crate::plan::mssql_to_pg::TablePlan;
use crate::schema::mssql_to_pg_types::quote_pg;
use bytes::{BufMut, Bytes, BytesMut};
use futures_util::SinkExt;
use tokio_postgres::Client;

/// The operation column of the staging tables: `U` (the row holds these values) or `D`.
const OP_COLUMN: &str = "_mssqlpg_op";

/// A table's staging table and statements.
struct StageTable {
    target: String,
    create: String,
    copy: String,
    delete: String,
    upsert: String,
}

/// The staging table of plan table `i`, and its statements.
fn stage_table(t: &TablePlan, i: usize) -> StageTable {
    let stage = quote_pg(&format!("_mssqlpg_online_{i}"));
    let target = qualified(t);
    let cols = copied_columns(t);
    let op = quote_pg(OP_COLUMN);
    let key: Vec<String> = t
        .source
        .primary_key
        .as_ref()
        .map(|pk| {
            pk.columns
                .iter()
                .map(|n| quote_pg(t.target_column(n).map_or(n.as_str(), |c| c.target_name.as_str())))
                .collect()
        })
        .unwrap_or_default();
    let on = key
        .iter()
        .map(|k| format!("t.{k} = s.{k}"))
        .collect::<Vec<_>>()
        .join(" AND ");
    StageTable {
        // The target's copied columns without their constraints (a deleted row's values are
        // NULL), emptied at each commit.
        create: format!(
            "CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS AS \
             SELECT ''::text AS {op}, {cols} FROM {target} WITH NO DATA"
        ),
        copy: format!("COPY {stage} ({op}, {cols}) FROM STDIN (FORMAT binary)"),
        delete: format!("DELETE FROM {target} AS t USING {stage} AS s WHERE s.{op} = 'D' AND {on}"),
        upsert: upsert_merge_from(t, &format!("{stage} WHERE {op} = 'U'")),
        target,
    }
}

/// Appends `image` with its operation in front as a row of a staging table.
fn stage_row(buf: &mut BytesMut, delete: bool, image: &MsRow) -> Result<(), OnlineError> {
    let tuple = &image.0;
    let count = tuple
        .get(..2)
        .map(|b| i16::from_be_bytes([b[0], b[1]]))
        .ok_or_else(|| OnlineError::Setup("an empty row image".into()))?;
    buf.put_i16(count + 1);
    buf.put_i32(1);
    buf.put_u8(if delete { b'D' } else { b'U' });
    buf.put_slice(&tuple[2..]);
    Ok(())
}

/// The PostgreSQL side of a SQL Server -> PostgreSQL stream.
pub struct PgApply {
    pg: Client,
    tables: Vec<StageTable>,
    migration: String,
    epoch: i64,
}

impl PgApply {
    /// Creates the staging tables (temporary, this connection's); `epoch` is the stream's, from
    /// [`OnlineState::claim`].
    pub async fn new(
        pg: Client,
        plan: &[TablePlan],
        migration: &str,
        epoch: i64,
    ) -> Result<Self, OnlineError> {
        let mut tables = Vec::with_capacity(plan.len());
        for (i, t) in plan.iter().enumerate() {
            let st = stage_table(t, i);
            pg.batch_execute(&st.create)
                .await
                .map_err(OnlineError::pg_target("create a staging table"))?;
            tables.push(st);
        }
        Ok(PgApply {
            pg,
            tables,
            migration: migration.to_string(),
            epoch,
        })
    }
}

impl Apply<MsRow> for PgApply {
    async fn apply(&mut self, drained: Drained<MsRow>, progress: &Progress) -> Result<(), OnlineError> {
        // Encoded before the transaction opens, so it stays short.
        let mut loads = Vec::with_capacity(drained.tables.len());
        for (i, changes) in &drained.tables {
            let mut buf = BytesMut::new();
            if !changes.rows.is_empty() {
                write_header(&mut buf);
                for op in changes.rows.values() {
                    match op {
                        Op::Upsert(r) => stage_row(&mut buf, false, r)?,
                        Op::Delete(r) => stage_row(&mut buf, true, r)?,
                    }
                }
                write_trailer(&mut buf);
            }
            loads.push((*i, changes.truncate, buf.freeze()));
        }
        let e = |what: &'static str| OnlineError::pg_target(what);
        // Dropped uncommitted on an error: rolled back.
        let tx = self.pg.transaction().await.map_err(e("begin a batch"))?;
        for (i, truncate, data) in loads {
            let st = &self.tables[i];
            if truncate {
                tx.batch_execute(&format!("TRUNCATE ONLY {}", st.target))
                    .await
                    .map_err(e("empty a table the source truncated"))?;
            }
            if data.is_empty() {
                continue;
            }
            let sink = tx
                .copy_in::<_, Bytes>(&st.copy)
                .await
                .map_err(e("load a staging table"))?;
            futures_util::pin_mut!(sink);
            sink.send(data).await.map_err(e("load a staging table"))?;
            sink.as_mut().finish().await.map_err(e("load a staging table"))?;
            tx.batch_execute(&st.delete)
                .await
                .map_err(e("delete a batch's rows"))?;
            tx.batch_execute(&st.upsert)
                .await
                .map_err(e("upsert a batch's rows"))?;
        }
        state_pg::advance(&tx, &self.migration, self.epoch, progress).await?;
        tx.commit().await.map_err(e("commit a batch"))
    }

    async fn control(&mut self) -> Result<Control, OnlineError> {
        self.pg.control(&self.migration, self.epoch).await
    }

    async fn record(&mut self, record: &Record) -> Result<(), OnlineError> {
        self.pg.record(&self.migration, self.epoch, record).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staged_row_is_its_operation_then_the_image() {
        let mut image = vec![0u8, 1];
        image.extend_from_slice(&(-1i32).to_be_bytes());
        let mut buf = BytesMut::new();
        stage_row(&mut buf, true, &MsRow(image.into())).unwrap();
        let mut want = vec![0u8, 2, 0, 0, 0, 1, b'D'];
        want.extend_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(&buf[..], &want[..]);
    }
}
