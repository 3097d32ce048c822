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
/// helper row's columns have names no table's is expected to have), and how many of them a
/// transaction at or after `mark` wrote.
///
/// `age(xid)` is how many transactions back from the next one an id lies (a 32-bit distance,
/// fixed for the statement), so a row is newer than the mark when its `xmin`'s age is at most
/// the mark's: two integer subtractions a row, a quarter of what placing each `xmin` in the
/// 64-bit sequence through text costs. Ages count 2^31 transactions at most: when the mark is
/// older than that, every row counts as changed (and the range is read again). A row frozen
/// long ago keeps its `xmin`, which may fall within the last transactions after the counter
/// wraps: it counts as changed, which only makes the verification read the range again.
pub async fn rows_and_changed(
    pg: &Client,
    from: &str,
    filter: Option<&str>,
    mark: i64,
) -> Result<(i64, i64), tokio_postgres::Error> {
    let filter = filter.map(|f| format!(" WHERE {f}")).unwrap_or_default();
    let sql = format!(
        "WITH h AS (SELECT age(($1::bigint % 4294967296)::text::xid) AS _mssqlpg_age, \
           txid_snapshot_xmax(txid_current_snapshot()) - $1::bigint >= 2147483647 AS _mssqlpg_all) \
         SELECT count(*), count(*) FILTER (WHERE h._mssqlpg_all OR h._mssqlpg_age < 0 \
           OR age(t.xmin) <= h._mssqlpg_age) \
         FROM h, {from} AS t{filter}"
    );
    let row = pg.query_one(&sql, &[&mark]).await?;
    Ok((row.get(0), row.get(1)))
}
