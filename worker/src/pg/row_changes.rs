//! PostgreSQL's own record of which rows changed since a moment: every row version carries the
//! id of the transaction that wrote it (`xmin`). The copy marks the oldest transaction still
//! running when it starts; at verification, a row whose `xmin` is that one or later was inserted
//! or updated since, and a deletion shows in the row count. Both come from one scan of the range,
//! committed rows only, without sending a row to the worker.

use tokio_postgres::Client;

/// The oldest transaction id (64-bit) still running now: any row a later transaction writes,
/// or this one when it commits, carries an `xmin` at or after it.
pub async fn xmin_mark(pg: &Client) -> Result<i64, tokio_postgres::Error> {
    Ok(pg
        .query_one(
            "SELECT txid_snapshot_xmin(txid_current_snapshot())::text::bigint",
            &[],
        )
        .await?
        .get(0))
}

/// The rows of `from` (a quoted table) matching `filter` (over its own columns, unqualified: the
/// helper row's one column has a name no table's is expected to have), and how many of them a transaction at
/// or after `mark` wrote. A row's 32-bit `xmin` is placed in the 64-bit sequence by its distance
/// back from the next id; a row older than 2^32 transactions (frozen long ago) may count as
/// changed, which only makes the verification read the range again.
pub async fn rows_and_changed(
    pg: &Client,
    from: &str,
    filter: Option<&str>,
    mark: i64,
) -> Result<(i64, i64), tokio_postgres::Error> {
    let filter = filter.map(|f| format!(" WHERE {f}")).unwrap_or_default();
    let sql = format!(
        "WITH h AS (SELECT txid_snapshot_xmax(txid_current_snapshot())::text::bigint AS _mssqlpg_next) \
         SELECT count(*), count(*) FILTER (WHERE \
           ((h._mssqlpg_next % 4294967296) - t.xmin::text::bigint + 4294967296) % 4294967296 \
             <= h._mssqlpg_next - $1) \
         FROM h, {from} AS t{filter}"
    );
    let row = pg.query_one(&sql, &[&mark]).await?;
    Ok((row.get(0), row.get(1)))
}
