#![allow(clippy::unwrap_used)]
mod common;
use common::*;

/// The queries the worker's MSSQL reader sends (worker/src/mssql), run against a small schema.
#[test]
fn worker_introspection_queries_run() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE p (id INT PRIMARY KEY); CREATE TABLE c (id INT IDENTITY(1,1) PRIMARY KEY, name VARCHAR(20) NOT NULL DEFAULT ('x'), \
         pid INT REFERENCES p (id), total AS (id * 2), CHECK (id > 0)); CREATE INDEX ix_c_name ON c (name) INCLUDE (pid)",
    );
    exec(&mut s, "INSERT INTO c (name) VALUES ('b'), ('c')");
    let sink = run(
        &mut s,
        "SELECT t.object_id, s.name, t.name FROM sys.tables t JOIN sys.schemas s ON s.schema_id = t.schema_id WHERE s.name = N'dbo' AND t.is_ms_shipped = 0",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT t.object_id, s.name, t.name FROM sys.tables t JOIN sys.schemas s ON s.schema_id = t.schema_id WHERE s.name = N'dbo' AND t.is_ms_shipped = 0",
        sink.errors()
    );
    let sink = run(&mut s, "SELECT user_type_id, name FROM sys.types");
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT user_type_id, name FROM sys.types",
        sink.errors()
    );
    let sink = run(
        &mut s,
        "SELECT object_id, column_id, name, system_type_id, user_type_id, max_length, precision, scale, is_nullable, is_identity, is_computed FROM sys.columns",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT object_id, column_id, name, system_type_id, user_type_id, max_length, precision, scale, is_nullable, is_identity, is_computed FROM sys.columns",
        sink.errors()
    );
    let sink = run(
        &mut s,
        "SELECT object_id, column_id, CAST(seed_value AS bigint), CAST(increment_value AS bigint), CAST(last_value AS bigint) FROM sys.identity_columns",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT object_id, column_id, CAST(seed_value AS bigint), CAST(increment_value AS bigint), CAST(last_value AS bigint) FROM sys.identity_columns",
        sink.errors()
    );
    let sink = run(
        &mut s,
        "SELECT object_id, column_id, definition FROM sys.computed_columns",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT object_id, column_id, definition FROM sys.computed_columns",
        sink.errors()
    );
    let sink = run(
        &mut s,
        "SELECT object_id, index_id, key_ordinal, index_column_id, column_id, is_descending_key, is_included_column FROM sys.index_columns",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT object_id, index_id, key_ordinal, index_column_id, column_id, is_descending_key, is_included_column FROM sys.index_columns",
        sink.errors()
    );
    let sink = run(
        &mut s,
        "SELECT object_id, index_id, name, is_unique, is_primary_key, is_unique_constraint, filter_definition FROM sys.indexes WHERE type IN (1, 2) AND is_hypothetical = 0 AND is_disabled = 0",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT object_id, index_id, name, is_unique, is_primary_key, is_unique_constraint, filter_definition FROM sys.indexes WHERE type IN (1, 2) AND is_hypothetical = 0 AND is_disabled = 0",
        sink.errors()
    );
    let sink = run(
        &mut s,
        "SELECT constraint_object_id, constraint_column_id, parent_object_id, parent_column_id, referenced_object_id, referenced_column_id FROM sys.foreign_key_columns",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT constraint_object_id, constraint_column_id, parent_object_id, parent_column_id, referenced_object_id, referenced_column_id FROM sys.foreign_key_columns",
        sink.errors()
    );
    let sink = run(
        &mut s,
        "SELECT object_id, parent_object_id, name, referenced_object_id, delete_referential_action_desc, update_referential_action_desc, is_disabled, is_not_trusted FROM sys.foreign_keys",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT object_id, parent_object_id, name, referenced_object_id, delete_referential_action_desc, update_referential_action_desc, is_disabled, is_not_trusted FROM sys.foreign_keys",
        sink.errors()
    );
    let sink = run(
        &mut s,
        "SELECT parent_object_id, name, definition, is_disabled, is_not_trusted FROM sys.check_constraints",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT parent_object_id, name, definition, is_disabled, is_not_trusted FROM sys.check_constraints",
        sink.errors()
    );
    let sink = run(
        &mut s,
        "SELECT parent_object_id, parent_column_id, definition FROM sys.default_constraints",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT parent_object_id, parent_column_id, definition FROM sys.default_constraints",
        sink.errors()
    );
    let sink = run(
        &mut s,
        "SELECT object_id, SUM(rows) FROM sys.partitions WHERE index_id IN (0, 1) GROUP BY object_id",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT object_id, SUM(rows) FROM sys.partitions WHERE index_id IN (0, 1) GROUP BY object_id",
        sink.errors()
    );
    let sink = run(
        &mut s,
        "SELECT net_packet_size FROM sys.dm_exec_connections WHERE session_id = @@SPID",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT net_packet_size FROM sys.dm_exec_connections WHERE session_id = @@SPID",
        sink.errors()
    );
    let sink = run(&mut s, "SELECT COUNT_BIG(*) FROM [dbo].[c]");
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT COUNT_BIG(*) FROM [dbo].[c]",
        sink.errors()
    );
    let sink = run(
        &mut s,
        "SELECT CAST(MIN([id]) AS bigint), CAST(MAX([id]) AS bigint) FROM [dbo].[c]",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT CAST(MIN([id]) AS bigint), CAST(MAX([id]) AS bigint) FROM [dbo].[c]",
        sink.errors()
    );
    let sink = run(
        &mut s,
        "SELECT [id], [name] FROM [dbo].[c] WHERE (([name] > CAST(N'a' AS varchar(8000)))) AND [id] > 0 ORDER BY [id]",
    );
    assert!(
        sink.errors().is_empty(),
        "{}: {:?}",
        "SELECT [id], [name] FROM [dbo].[c] WHERE (([name] > CAST(N'a' AS varchar(8000)))) AND [id] > 0 ORDER BY [id]",
        sink.errors()
    );
}
