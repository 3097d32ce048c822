//! SQL Server's own count of the rows written to a table: the leaf-level inserts, updates,
//! deletes and ghosts of its indexes in `sys.dm_db_index_operational_stats`, summed. Taken before
//! the copy and again at verification: equal, nobody wrote the table in between (reads do not
//! count). The counters need `VIEW DATABASE STATE` (`VIEW DATABASE PERFORMANCE STATE` from SQL
//! Server 2022); a login without it gets `None`, and the verification reads the source again.

use crate::mssql::connect::TdsClient;
use std::collections::HashMap;
use tiberius::Query;

const WRITES: &str = "SELECT s.name, o.name, \
     SUM(x.leaf_insert_count + x.leaf_delete_count + x.leaf_update_count + x.leaf_ghost_count) \
     FROM sys.dm_db_index_operational_stats(DB_ID(), OBJECT_ID(@P1), NULL, NULL) AS x \
     JOIN sys.objects AS o ON o.object_id = x.object_id \
     JOIN sys.schemas AS s ON s.schema_id = o.schema_id \
     WHERE o.type = 'U' GROUP BY s.name, o.name";

/// Rows written per table, by (schema, name): every table of the database when `table` (a
/// quoted `[schema].[name]`) is `None`, else that one. `Ok(None)`: SQL Server refused to show
/// them (the server's message says why); a lost connection is an error.
pub async fn table_writes(
    client: &mut TdsClient,
    table: Option<&str>,
) -> Result<Option<HashMap<(String, String), i64>>, tiberius::error::Error> {
    let mut q = Query::new(WRITES);
    q.bind(table);
    let rows = match q.query(client).await {
        Ok(s) => s.into_first_result().await,
        Err(e) => Err(e),
    };
    let rows = match rows {
        Ok(rows) => rows,
        Err(tiberius::error::Error::Server(e)) => {
            tracing::warn!(
                error = %e.message(),
                "SQL Server does not show this login its write counters (VIEW DATABASE STATE); \
                 verification reads the source again"
            );
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let mut out = HashMap::new();
    for r in rows {
        if let (Some(schema), Some(name), Some(writes)) = (
            r.try_get::<&str, _>(0)?,
            r.try_get::<&str, _>(1)?,
            r.try_get::<i64, _>(2)?,
        ) {
            out.insert((schema.to_string(), name.to_string()), writes);
        }
    }
    Ok(Some(out))
}
