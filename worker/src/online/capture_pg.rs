//! PostgreSQL as an online source: a publication of the migrated tables and a logical
//! replication slot (`pgoutput`), read through the streaming replication protocol
//! (`START_REPLICATION`, [`super::capture_pg_stream`]) and acknowledged (the flush position of the
//! standby status updates) only after the target committed. The slot SQL functions (peek, then
//! advance) were the first way: each peek decodes the WAL again from the slot's restart point,
//! which cost the source many times the CPU with many small transactions; the walsender decodes
//! each record once. Heartbeats, the fence and the source's position go through an ordinary
//! connection.
//!
//! The slot is created before the copy reads a row and its consistent point is the stream's
//! anchor: a change committed after it is in the stream; the copy, reading later snapshots, may
//! hold some of those changes already, which is harmless because applying them again leaves each
//! key with its last image.
//!
//! Row images stay in PostgreSQL's text form until a batch is applied; then [`PgConverter`] asks
//! PostgreSQL to turn them into the copy's own form (each column's read expression, in binary),
//! so a streamed value reaches the target through exactly the conversion a copied one takes.

use super::batch::{ChangeKind, Image, Op};
use super::capture_pg_stream::{SlotStream, StreamFault, fault_error};
use super::pgoutput::{self, Datum, Message, OldKind};
use super::{Capture, Event, OnlineError, Position};
use crate::pg::connect::PgEndpoint;
use crate::plan::pg_to_mssql::PgToMssqlTablePlan;
use crate::schema::mssql_to_pg_types::quote_pg;
use futures_util::TryStreamExt;
use pgwire_replication::ReplicationEvent;
use std::collections::HashMap;
use std::time::Duration;
use tokio_postgres::Client;
use tokio_postgres::types::{FromSql, ToSql, Type};

/// The prefix of the cutover's fence message.
pub const FENCE_PREFIX: &str = "mssqlpg_fence";
/// The prefix of heartbeat messages.
pub const HEARTBEAT_PREFIX: &str = "mssqlpg_heartbeat";
/// The prefix of the marker before a table's re-copy: `<token> <table index>`.
pub const RECOPY_PREFIX: &str = "mssqlpg_recopy";

/// Session settings of both the reading and the converting connection: the text forms the
/// output functions write and the input functions read back must agree (and round-trip floats).
const SESSION: &str = "SET intervalstyle = 'iso_8601'; SET TimeZone = 'UTC'; \
     SET standard_conforming_strings = on; SET extra_float_digits = 3; SET DateStyle = 'ISO, YMD'; \
     SET bytea_output = 'hex'; SET synchronous_commit = on";

/// The slot and publication of a migration: `mssqlpg_` and the migration's name reduced to
/// what an unquoted PostgreSQL identifier holds, with a hash that keeps distinct names apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotNames {
    pub slot: String,
    pub publication: String,
}

impl SlotNames {
    pub fn of(migration: &str) -> Self {
        use sha2::Digest;
        let clean: String = migration
            .chars()
            .map(|c| match c.to_ascii_lowercase() {
                c @ ('a'..='z' | '0'..='9') => c,
                _ => '_',
            })
            .take(40)
            .collect();
        let hash = sha2::Sha256::digest(migration.as_bytes());
        let name = format!(
            "mssqlpg_{clean}_{:02x}{:02x}{:02x}{:02x}",
            hash[0], hash[1], hash[2], hash[3]
        );
        SlotNames {
            slot: name.clone(),
            publication: name,
        }
    }
}

/// A migrated table as the capture needs it.
#[derive(Debug, Clone)]
pub struct CaptureTable {
    pub schema: String,
    pub name: String,
    /// The plan's columns (source names), in the plan's order.
    pub columns: Vec<String>,
    /// Columns the target computes itself (never loaded, sent as NULL).
    pub computed: Vec<bool>,
    /// Indexes into `columns` of the primary key.
    pub key: Vec<usize>,
    /// Every column the source table had when it was planned: a relation with one more has
    /// drifted.
    pub source_columns: Vec<String>,
    /// Each plan column's type as planned (`format_type`): a relation with another has drifted.
    pub column_types: Vec<String>,
}

impl CaptureTable {
    pub fn of(t: &PgToMssqlTablePlan) -> Result<Self, OnlineError> {
        let columns: Vec<String> = t.columns.iter().map(|c| c.source.name.clone()).collect();
        let pk = t.source.primary_key.as_ref().ok_or_else(|| {
            OnlineError::Setup(crate::plan::mssql_to_pg::online_without_key(&[t
                .source
                .qualified()]))
        })?;
        let key = pk
            .columns
            .iter()
            .map(|k| {
                columns.iter().position(|c| c == k).ok_or_else(|| {
                    OnlineError::Setup(format!(
                        "table {}: primary key column {k} is not among the migrated columns",
                        t.source.qualified()
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(CaptureTable {
            schema: t.source.schema.clone(),
            name: t.source.name.clone(),
            computed: t.columns.iter().map(|c| c.computed.is_some()).collect(),
            columns,
            key,
            source_columns: t.source.columns.iter().map(|c| c.name.clone()).collect(),
            column_types: t.columns.iter().map(|c| c.source.formatted.clone()).collect(),
        })
    }

    fn qualified(&self) -> String {
        format!("{}.{}", quote_pg(&self.schema), quote_pg(&self.name))
    }
}

/// A value of a row image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    Null,
    /// Not sent: an unchanged TOASTed value, or a column the stream does not carry (a stored
    /// generated column); the value the row holds at the source is used, or the target's kept.
    Unchanged,
    /// The value's text form.
    Text(Box<[u8]>),
}

/// A row image in the plan's column order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgRow(pub Vec<Field>);

impl Image for PgRow {
    fn size(&self) -> usize {
        self.0
            .iter()
            .map(|f| match f {
                Field::Text(t) => t.len() + 24,
                _ => 24,
            })
            .sum::<usize>()
            + 24
    }

    fn over(self, earlier: Self) -> Self {
        PgRow(
            self.0
                .into_iter()
                .zip(earlier.0)
                .map(|(later, earlier)| match later {
                    Field::Unchanged => earlier,
                    v => v,
                })
                .collect(),
        )
    }
}

fn pg(what: &'static str) -> impl FnOnce(tokio_postgres::Error) -> OnlineError {
    OnlineError::source(what)
}

/// Refuses a source that cannot be read by logical decoding, saying what to change.
pub async fn check_source(pg_client: &Client) -> Result<(), OnlineError> {
    let row = pg_client
        .query_one(
            "SELECT current_setting('wal_level'), \
             (SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user)",
            &[],
        )
        .await
        .map_err(pg("check logical decoding"))?;
    let wal_level: String = row.get(0);
    let can: Option<bool> = row.get(1);
    let mut problems = Vec::new();
    if wal_level != "logical" {
        problems.push(format!(
            "wal_level is {wal_level}: set wal_level = logical (ALTER SYSTEM SET wal_level = logical, then restart)"
        ));
    }
    if can != Some(true) {
        problems.push(
            "the source user may not use replication slots: ALTER ROLE ... WITH REPLICATION".to_string(),
        );
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(OnlineError::Setup(format!(
            "an online migration reads PostgreSQL by logical decoding: {}",
            problems.join("; ")
        )))
    }
}

/// The slot's confirmed position, when it exists.
pub async fn slot_position(pg_client: &Client, slot: &str) -> Result<Option<Position>, OnlineError> {
    let row = pg_client
        .query_opt(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(pg("look up the replication slot"))?;
    Ok(row
        .and_then(|r| r.get::<_, Option<String>>(0))
        .and_then(|t| pgoutput::parse_lsn(&t)))
}

/// Drops the slot and the publication, when they exist.
pub async fn drop_stream(pg_client: &Client, names: &SlotNames) -> Result<(), OnlineError> {
    pg_client
        .execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1",
            &[&names.slot],
        )
        .await
        .map_err(pg("drop the replication slot"))?;
    pg_client
        .batch_execute(&format!(
            "DROP PUBLICATION IF EXISTS {}",
            quote_pg(&names.publication)
        ))
        .await
        .map_err(pg("drop the publication"))?;
    Ok(())
}

/// A new stream for `tables`: the publication first (pgoutput reads it as of each change), then
/// the slot, whose consistent point is returned: the anchor. Any earlier slot and publication of
/// the migration go first.
pub async fn create_stream(
    pg_client: &Client,
    names: &SlotNames,
    tables: &[CaptureTable],
) -> Result<Position, OnlineError> {
    drop_stream(pg_client, names).await?;
    let list = tables
        .iter()
        .map(CaptureTable::qualified)
        .collect::<Vec<_>>()
        .join(", ");
    pg_client
        .batch_execute(&format!(
            "CREATE PUBLICATION {} FOR TABLE {list} WITH (publish = 'insert, update, delete, truncate', \
             publish_via_partition_root = true)",
            quote_pg(&names.publication)
        ))
        .await
        .map_err(pg("create the publication"))?;
    let row = pg_client
        .query_one(
            "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')",
            &[&names.slot],
        )
        .await
        .map_err(pg("create the replication slot"))?;
    let lsn: String = row.get(0);
    pgoutput::parse_lsn(&lsn)
        .ok_or_else(|| OnlineError::Setup(format!("the slot's consistent point {lsn:?} is not an LSN")))
}

/// A column whose type changed, as [`drift_message`] lists it.
pub fn retyped_text(column: &str, was: &str, is: &str) -> String {
    format!("{column} from {was} to {is}")
}

/// The message of a table whose source columns no longer match the plan's, if they do not:
/// columns added, dropped (or renamed), and whose type changed ([`retyped_text`]).
pub fn drift_message(table: &str, added: &[&str], gone: &[&str], retyped: &[String]) -> Option<String> {
    if added.is_empty() && gone.is_empty() && retyped.is_empty() {
        return None;
    }
    let mut what = Vec::new();
    if !added.is_empty() {
        what.push(format!("added {}", added.join(", ")));
    }
    if !gone.is_empty() {
        what.push(format!("dropped or renamed {}", gone.join(", ")));
    }
    if !retyped.is_empty() {
        what.push(format!("changed the type of {}", retyped.join(", ")));
    }
    Some(format!(
        "table {table} paused: its columns changed in the source while streaming ({}); its changes are no \
         longer applied, the other tables' are",
        what.join("; ")
    ))
}

/// The (type OID, typmod) pairs of the columns of `tables` now, with their `format_type`; and
/// every type's name (`format_type(oid, NULL)`) but tables' row types.
async fn column_types(
    client: &Client,
    tables: &[CaptureTable],
) -> Result<(HashMap<(u32, i32), String>, HashMap<u32, String>), OnlineError> {
    let schemas: Vec<&str> = tables.iter().map(|t| t.schema.as_str()).collect();
    let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
    let rows = client
        .query(
            "SELECT DISTINCT a.atttypid, a.atttypmod, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
             JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE (n.nspname::text, c.relname::text) IN (SELECT * FROM unnest($1::text[], $2::text[])) \
             AND a.attnum > 0 AND NOT a.attisdropped",
            &[&schemas, &names],
        )
        .await
        .map_err(pg("read the tables' column types"))?;
    let types = rows
        .iter()
        .map(|r| ((r.get::<_, u32>(0), r.get::<_, i32>(1)), r.get::<_, String>(2)))
        .collect();
    let rows = client
        .query(
            "SELECT oid, format_type(oid, NULL) FROM pg_type WHERE typrelid = 0",
            &[],
        )
        .await
        .map_err(pg("read the type names"))?;
    let names = rows
        .iter()
        .map(|r| (r.get::<_, u32>(0), r.get::<_, String>(1)))
        .collect();
    Ok((types, names))
}

/// The plan columns of `t` whose type in the relation (`from`: each one's position in
/// `columns`) is not the planned one, as [`retyped_text`] lists them. A (type OID, typmod) pair
/// in `types` is named as it is there; one not in it is a type no column had when the capture
/// connected, named by [`type_text`].
fn retyped_columns(
    t: &CaptureTable,
    from: &[Option<usize>],
    columns: &[pgoutput::RelationColumn],
    types: &HashMap<(u32, i32), String>,
    type_names: &HashMap<u32, String>,
) -> Vec<String> {
    t.columns
        .iter()
        .zip(from)
        .zip(&t.column_types)
        .filter_map(|((c, at), planned)| {
            let rc = columns.get((*at)?)?;
            let now = match types.get(&(rc.type_oid, rc.type_modifier)) {
                Some(known) if known == planned => return None,
                Some(known) => known.clone(),
                None => type_text(type_names, rc.type_oid, rc.type_modifier),
            };
            (now != *planned).then(|| retyped_text(c, planned, &now))
        })
        .collect()
}

/// A type as `format_type` spells it, from its name (`format_type(oid, NULL)`) and typmod, for
/// the types whose typmod shows; others by name and typmod.
fn type_text(names: &HashMap<u32, String>, oid: u32, typmod: i32) -> String {
    let name = names.get(&oid).cloned().unwrap_or_else(|| format!("type {oid}"));
    if typmod < 0 {
        return name;
    }
    match oid {
        // bpchar, varchar: the length plus the header's 4 bytes.
        1042 | 1043 => format!("{name}({})", typmod - 4),
        // bit, varbit
        1560 | 1562 => format!("{name}({typmod})"),
        // numeric: precision and scale, after the header's 4 bytes.
        1700 => {
            let t = typmod - 4;
            format!("{name}({},{})", (t >> 16) & 0xffff, ((t & 0x7ff) ^ 1024) - 1024)
        }
        // time, timestamp (with and without time zone): the precision before the zone.
        1083 | 1114 | 1184 | 1266 => match name.split_once(' ') {
            Some((base, zone)) => format!("{base}({typmod}) {zone}"),
            None => format!("{name}({typmod})"),
        },
        _ => format!("{name} (typmod {typmod})"),
    }
}

/// How a relation of the stream maps to a plan table.
struct RelationMap {
    table: usize,
    /// Per plan column, its position in the relation's tuples.
    from: Vec<Option<usize>>,
    /// The relation's columns differ from the plan's: its changes are not read.
    drifted: bool,
}

/// How long a poll waits, between transactions, for the stream to show it has read as far as
/// the source had flushed when the poll started, before it counts the source as drained anyway.
const QUIET: Duration = Duration::from_secs(1);

/// Reads the slot.
pub struct PgCapture {
    client: Client,
    endpoint: PgEndpoint,
    /// The replication session, opened at the first poll and again after a fault.
    stream: Option<SlotStream>,
    names: SlotNames,
    tables: Vec<CaptureTable>,
    relations: HashMap<u32, RelationMap>,
    /// Messages per poll: a poll ends at the first transaction end past it.
    poll_messages: usize,
    /// The source's flushed position when the stream loop last asked for its position (right
    /// before each poll): the walsender reads no further than the flushed WAL.
    flushed: Position,
    /// How far the stream has shown it read: the end of the last commit, or a keepalive's.
    read_to: Position,
    /// A transaction's Begin came and its Commit not yet.
    in_transaction: bool,
    /// Sessions that failed since the last commit read, the server up.
    faults: u32,
    /// `format_type` of the (type OID, typmod) pairs the tables' columns had when the capture
    /// connected: a relation's column with a pair not in it changed its type since.
    types: HashMap<(u32, i32), String>,
    /// `format_type(oid, NULL)` of every type that is not a table's row type, to name a new one.
    type_names: HashMap<u32, String>,
    /// Tables the user asked to copy again, until the target holds their copy.
    recopy: Vec<usize>,
    /// Of those, the ones whose marker was written (this process's markers carry `token`).
    marked: Vec<usize>,
    token: String,
    /// A marker just decoded: the table to read whole before the stream goes on.
    whole: Option<usize>,
    /// Tables read whole, with the end of the marker's transaction once it came.
    read_at: Vec<(usize, Option<Position>)>,
    /// Tables whose copy the target holds, for the stream to take.
    recopied_done: Vec<usize>,
    /// The connection reading tables whole (the slot's is busy with the stream meanwhile).
    reader: Option<Client>,
}

impl PgCapture {
    /// `recopy`: tables the user asked to copy again, read whole after a marker the first poll
    /// writes.
    pub async fn connect(
        endpoint: &PgEndpoint,
        names: SlotNames,
        tables: Vec<CaptureTable>,
        poll_messages: usize,
        recopy: Vec<usize>,
    ) -> Result<Self, OnlineError> {
        let client = endpoint.connect().await?;
        client
            .batch_execute(SESSION)
            .await
            .map_err(pg("session settings"))?;
        let (types, type_names) = column_types(&client, &tables).await?;
        Ok(PgCapture {
            client,
            endpoint: endpoint.clone(),
            stream: None,
            names,
            tables,
            relations: HashMap::new(),
            poll_messages: poll_messages.max(1),
            flushed: 0,
            read_to: 0,
            in_transaction: false,
            faults: 0,
            types,
            type_names,
            recopy,
            marked: Vec::new(),
            token: super::now_micros().to_string(),
            whole: None,
            read_at: Vec::new(),
            recopied_done: Vec::new(),
            reader: None,
        })
    }

    /// Writes the marker of each table to copy again not marked yet: its whole read, taken
    /// after the marker's commit, goes into the stream at the marker, and the table's changes
    /// after it are applied on top (those committed between the marker and the read again,
    /// which leaves each key with its last image).
    async fn mark_recopies(&mut self) -> Result<(), OnlineError> {
        for &i in &self.recopy {
            if self.marked.contains(&i) {
                continue;
            }
            self.client
                .execute(
                    "SELECT pg_logical_emit_message(true, $1, $2)",
                    &[&RECOPY_PREFIX, &format!("{} {i}", self.token)],
                )
                .await
                .map_err(pg("write the re-copy marker"))?;
            self.marked.push(i);
        }
        Ok(())
    }

    /// Sends every row of table `i` as it is now, as changes; false once the receiver is gone.
    async fn send_whole(
        &mut self,
        i: usize,
        tx: &tokio::sync::mpsc::Sender<Event<PgRow>>,
    ) -> Result<bool, OnlineError> {
        if self.reader.is_none() {
            let c = self.endpoint.connect().await?;
            c.batch_execute(SESSION).await.map_err(pg("session settings"))?;
            self.reader = Some(c);
        }
        let t = &self.tables[i];
        let select = t
            .columns
            .iter()
            .zip(&t.computed)
            .map(|(c, computed)| {
                if *computed {
                    "NULL::text".to_string()
                } else {
                    format!("{}::text", quote_pg(c))
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!("SELECT {select} FROM {}", t.qualified());
        let Some(reader) = self.reader.as_ref() else {
            return Ok(true);
        };
        let rows = reader
            .query_raw(&sql, std::iter::empty::<&(dyn ToSql + Sync)>())
            .await
            .map_err(pg("read a table whole"))?;
        futures_util::pin_mut!(rows);
        while let Some(row) = rows.try_next().await.map_err(pg("read a table whole"))? {
            let fields: Vec<Field> = (0..row.len())
                .map(|c| match row.get::<_, Option<&str>>(c) {
                    Some(v) => Field::Text(v.as_bytes().into()),
                    None => Field::Null,
                })
                .collect();
            let image = PgRow(fields);
            let key = self.key(i, &image).ok_or_else(|| self.key_error(i))?;
            let event = Event::Change {
                table: i,
                key,
                op: Op::Upsert(image),
                kind: None,
            };
            if tx.send(event).await.is_err() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The error of a session fault: the ordinary connection's, when the server is gone too (a
    /// fault that passes, retried from the target's position), else the session's own.
    async fn fault(&mut self, what: &str, e: StreamFault) -> OnlineError {
        if let Some(stream) = self.stream.take() {
            stream.close().await;
        }
        match self.client.simple_query("SELECT 1").await {
            Err(source) => OnlineError::Source {
                what: format!("{what}: {e}"),
                source,
            },
            Ok(_) => fault_error(what, &self.endpoint, &self.names.slot, &e),
        }
    }

    /// A session that failed while the server stays up is opened again at the next poll (from
    /// the slot's confirmed position; what the target holds already is skipped), a few times
    /// in a row at most.
    async fn stream_failed(&mut self, e: StreamFault) -> Result<bool, OnlineError> {
        let error = self.fault("read the replication stream", e).await;
        self.faults += 1;
        if matches!(error, OnlineError::Source { .. }) || self.faults >= 3 {
            return Err(error);
        }
        tracing::warn!(error = %error, "the replication session failed; opening it again");
        Ok(false)
    }

    /// The open session, opened from the slot's confirmed position when there is none.
    async fn stream(&mut self) -> Result<&mut SlotStream, OnlineError> {
        if self.stream.is_none() {
            match SlotStream::open(&self.endpoint, &self.names.slot, &self.names.publication).await {
                Ok(s) => {
                    self.in_transaction = false;
                    self.stream = Some(s);
                }
                Err(e) => return Err(self.fault("open the replication stream", e).await),
            }
        }
        self.stream
            .as_mut()
            .ok_or_else(|| OnlineError::Setup("the replication stream is not open".into()))
    }

    /// Sends the events of one message; false when the receiver is gone.
    async fn send(
        &mut self,
        m: Message<'_>,
        events: &mut Vec<Event<PgRow>>,
        tx: &tokio::sync::mpsc::Sender<Event<PgRow>>,
    ) -> Result<bool, OnlineError> {
        self.events(m, events)?;
        for e in events.drain(..) {
            if tx.send(e).await.is_err() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Maps a relation of the stream to its plan table; the table and a message naming the
    /// columns when they no longer match the plan's.
    fn relation(&mut self, r: pgoutput::Relation) -> Option<(usize, String)> {
        let namespace = if r.namespace.is_empty() {
            "pg_catalog"
        } else {
            r.namespace.as_str()
        };
        let Some(table) = self
            .tables
            .iter()
            .position(|t| t.schema == namespace && t.name == r.name)
        else {
            self.relations.remove(&r.id);
            return None;
        };
        let t = &self.tables[table];
        let from: Vec<Option<usize>> = t
            .columns
            .iter()
            .map(|c| r.columns.iter().position(|rc| &rc.name == c))
            .collect();
        // Generated columns are not published: their absence is no change.
        let gone: Vec<&str> = t
            .columns
            .iter()
            .zip(&from)
            .zip(&t.computed)
            .filter(|((_, at), computed)| at.is_none() && !**computed)
            .map(|((c, _), _)| c.as_str())
            .collect();
        let added: Vec<&str> = r
            .columns
            .iter()
            .map(|c| c.name.as_str())
            .filter(|c| !t.source_columns.iter().any(|s| s == c))
            .collect();
        let retyped = retyped_columns(t, &from, &r.columns, &self.types, &self.type_names);
        let drift = drift_message(&format!("{}.{}", t.schema, t.name), &added, &gone, &retyped);
        self.relations.insert(
            r.id,
            RelationMap {
                table,
                from,
                drifted: drift.is_some(),
            },
        );
        drift.map(|m| (table, m))
    }

    /// A tuple in the plan's column order.
    fn row(&self, map: &RelationMap, tuple: &[Datum<'_>]) -> Result<PgRow, OnlineError> {
        let t = &self.tables[map.table];
        map.from
            .iter()
            .enumerate()
            .map(|(i, at)| match at {
                None if t.computed[i] => Ok(Field::Null),
                None => Ok(Field::Unchanged),
                Some(at) => match tuple.get(*at) {
                    Some(Datum::Null) => Ok(Field::Null),
                    Some(Datum::Unchanged) => Ok(Field::Unchanged),
                    Some(Datum::Text(v)) => Ok(Field::Text((*v).into())),
                    Some(Datum::Binary(_)) | None => Err(OnlineError::Setup(format!(
                        "table {}.{}: the change stream's tuple does not match its relation",
                        t.schema, t.name
                    ))),
                },
            })
            .collect::<Result<Vec<_>, _>>()
            .map(PgRow)
    }

    /// The key of a row image, or `None` when a key column is not in it.
    fn key(&self, table: usize, row: &PgRow) -> Option<Vec<u8>> {
        let mut key = Vec::new();
        for &k in &self.tables[table].key {
            let Field::Text(v) = &row.0[k] else {
                return None;
            };
            key.extend_from_slice(&(v.len() as u32).to_be_bytes());
            key.extend_from_slice(v);
        }
        Some(key)
    }

    fn key_error(&self, table: usize) -> OnlineError {
        let t = &self.tables[table];
        OnlineError::Setup(format!(
            "table {}.{}: a change arrived without its primary key values",
            t.schema, t.name
        ))
    }

    /// The events of one decoded message.
    fn events(&mut self, m: Message<'_>, out: &mut Vec<Event<PgRow>>) -> Result<(), OnlineError> {
        match m {
            Message::Begin { final_lsn, .. } => out.push(Event::Begin { commit: final_lsn }),
            Message::Commit { end_lsn, .. } => {
                for (_, end) in self.read_at.iter_mut().filter(|(_, e)| e.is_none()) {
                    *end = Some(end_lsn);
                }
                out.push(Event::Commit { end: end_lsn })
            }
            Message::Relation(r) => {
                if let Some((table, message)) = self.relation(r) {
                    out.push(Event::Drift { table, message });
                }
            }
            Message::Origin | Message::Type => {}
            Message::Insert { relation, new } => {
                let Some(map) = self.relations.get(&relation).filter(|m| !m.drifted) else {
                    return Ok(());
                };
                let row = self.row(map, &new)?;
                let table = map.table;
                let key = self.key(table, &row).ok_or_else(|| self.key_error(table))?;
                out.push(Event::Change {
                    table,
                    key,
                    op: Op::Upsert(row),
                    kind: Some(ChangeKind::Insert),
                });
            }
            Message::Update { relation, old, new } => {
                let Some(map) = self.relations.get(&relation).filter(|m| !m.drifted) else {
                    return Ok(());
                };
                let table = map.table;
                let mut row = self.row(map, &new)?;
                let old = old.map(|(_, t)| self.row(map, &t)).transpose()?;
                // A key column left unchanged (TOASTed) comes with the old key.
                if let Some(old) = &old {
                    for &k in &self.tables[table].key {
                        if row.0[k] == Field::Unchanged {
                            row.0[k] = old.0[k].clone();
                        }
                    }
                }
                let key = self.key(table, &row).ok_or_else(|| self.key_error(table))?;
                if let Some(old) = old
                    && let Some(old_key) = self.key(table, &old)
                    && old_key != key
                {
                    out.push(Event::Change {
                        table,
                        key: old_key,
                        op: Op::Delete(old),
                        kind: None,
                    });
                }
                out.push(Event::Change {
                    table,
                    key,
                    op: Op::Upsert(row),
                    kind: Some(ChangeKind::Update),
                });
            }
            Message::Delete { relation, old } => {
                let Some(map) = self.relations.get(&relation).filter(|m| !m.drifted) else {
                    return Ok(());
                };
                let table = map.table;
                let (kind, tuple) = old;
                let mut row = self.row(map, &tuple)?;
                if kind == OldKind::Key {
                    // Only the key is sent; the rest is no value of the row.
                    for f in &mut row.0 {
                        if *f == Field::Unchanged {
                            *f = Field::Null;
                        }
                    }
                }
                let key = self.key(table, &row).ok_or_else(|| self.key_error(table))?;
                out.push(Event::Change {
                    table,
                    key,
                    op: Op::Delete(row),
                    kind: Some(ChangeKind::Delete),
                });
            }
            Message::Truncate { relations } => {
                let tables: Vec<usize> = relations
                    .iter()
                    .filter_map(|r| self.relations.get(r).filter(|m| !m.drifted).map(|m| m.table))
                    .collect();
                if !tables.is_empty() {
                    out.push(Event::Truncate { tables });
                }
            }
            Message::Message {
                lsn, prefix, content, ..
            } => match prefix {
                FENCE_PREFIX => out.push(Event::Fence {
                    id: String::from_utf8_lossy(content).into_owned(),
                }),
                RECOPY_PREFIX => {
                    let text = String::from_utf8_lossy(content);
                    // Another process's marker (before a restart) was superseded by this one's.
                    if let Some((token, i)) = text.split_once(' ')
                        && token == self.token
                        && let Ok(i) = i.parse::<usize>()
                        && self.marked.contains(&i)
                        && !self.read_at.iter().any(|(t, _)| *t == i)
                    {
                        out.push(Event::Truncate { tables: vec![i] });
                        self.whole = Some(i);
                        self.read_at.push((i, None));
                    }
                }
                HEARTBEAT_PREFIX => {
                    if let Some(sent) = std::str::from_utf8(content)
                        .ok()
                        .and_then(|s| s.parse::<i64>().ok())
                    {
                        out.push(Event::Heartbeat {
                            position: lsn,
                            sent_micros: sent,
                        });
                    }
                }
                _ => {}
            },
        }
        Ok(())
    }
}

impl Capture for PgCapture {
    type Row = PgRow;

    async fn poll(&mut self, tx: tokio::sync::mpsc::Sender<Event<PgRow>>) -> Result<bool, OnlineError> {
        let as_of_micros = super::now_micros();
        self.mark_recopies().await?;
        let flushed = self.flushed;
        let mut events = Vec::new();
        let mut n = 0usize;
        loop {
            if !self.in_transaction {
                if self.read_to >= flushed {
                    let _ = tx.send(Event::CaughtUp { as_of_micros }).await;
                    return Ok(true);
                }
                if n >= self.poll_messages {
                    return Ok(false);
                }
            }
            // Inside a transaction the walsender may decode for long between messages (a big
            // transaction's changes spilled to disk): no limit there.
            let wait = (!self.in_transaction).then_some(QUIET);
            let next = self.stream().await?.next(wait).await;
            let event = match next {
                Ok(Some(event)) => event,
                // Nothing more for now, though the stream has not shown it read to the flushed
                // position (WAL that decodes to nothing): drained, but no claim of being caught up.
                Ok(None) => return Ok(true),
                Err(e) => return self.stream_failed(e).await,
            };
            n += 1;
            let sent = match event {
                ReplicationEvent::XLogData { data, .. } => {
                    let m = pgoutput::decode(&data)?;
                    self.send(m, &mut events, &tx).await?
                }
                ReplicationEvent::Begin {
                    final_lsn,
                    xid,
                    commit_time_micros,
                } => {
                    self.in_transaction = true;
                    let m = Message::Begin {
                        final_lsn: final_lsn.as_u64(),
                        commit_time: commit_time_micros,
                        xid,
                    };
                    self.send(m, &mut events, &tx).await?
                }
                ReplicationEvent::Commit {
                    lsn,
                    end_lsn,
                    commit_time_micros,
                } => {
                    self.in_transaction = false;
                    self.faults = 0;
                    self.read_to = self.read_to.max(end_lsn.as_u64());
                    let m = Message::Commit {
                        commit_lsn: lsn.as_u64(),
                        end_lsn: end_lsn.as_u64(),
                        commit_time: commit_time_micros,
                    };
                    self.send(m, &mut events, &tx).await?
                }
                ReplicationEvent::Message {
                    transactional,
                    lsn,
                    prefix,
                    content,
                } => {
                    let m = Message::Message {
                        transactional,
                        lsn: lsn.as_u64(),
                        prefix: &prefix,
                        content: &content,
                    };
                    self.send(m, &mut events, &tx).await?
                }
                ReplicationEvent::KeepAlive { wal_end, .. } => {
                    if !self.in_transaction {
                        self.read_to = self.read_to.max(wal_end.as_u64());
                    }
                    true
                }
                ReplicationEvent::StoppedAt { .. } => true,
            };
            if !sent {
                return Ok(false);
            }
            if let Some(i) = self.whole.take()
                && !self.send_whole(i, &tx).await?
            {
                return Ok(false);
            }
        }
    }

    async fn acknowledge(&mut self, applied: Position) -> Result<(), OnlineError> {
        if let Some(stream) = &self.stream {
            stream.acknowledge(applied);
        } else {
            // No session (it failed): the slot is free to advance directly.
            let lsn = pgoutput::lsn_text(applied);
            self.client
                .execute(
                    "SELECT pg_replication_slot_advance(slot_name, $2::text::pg_lsn) FROM pg_replication_slots \
                     WHERE slot_name = $1 AND confirmed_flush_lsn < $2::text::pg_lsn AND NOT active",
                    &[&self.names.slot, &lsn],
                )
                .await
                .map_err(pg("advance the replication slot"))?;
        }
        // A re-copy is held once the target holds the marker's whole transaction.
        let (held, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.read_at)
            .into_iter()
            .partition(|(_, end)| end.is_some_and(|e| e <= applied));
        self.read_at = waiting;
        for (i, _) in held {
            self.recopy.retain(|r| *r != i);
            self.recopied_done.push(i);
        }
        Ok(())
    }

    fn recopying(&self) -> Vec<usize> {
        self.recopy.clone()
    }

    fn recopied(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.recopied_done)
    }

    async fn heartbeat(&mut self, sent_micros: i64) -> Result<(), OnlineError> {
        // Transactional, so its commit flushes the WAL (an idle server's non-transactional
        // message can wait in the WAL buffers, out of the decoder's reach).
        self.client
            .execute(
                "SELECT pg_logical_emit_message(true, $1, $2)",
                &[&HEARTBEAT_PREFIX, &sent_micros.to_string()],
            )
            .await
            .map_err(pg("write a heartbeat"))?;
        Ok(())
    }

    async fn fence(&mut self, id: &str) -> Result<Position, OnlineError> {
        let row = self
            .client
            .query_one(
                "SELECT pg_logical_emit_message(true, $1, $2)::text",
                &[&FENCE_PREFIX, &id],
            )
            .await
            .map_err(pg("write the cutover fence"))?;
        let lsn: String = row.get(0);
        pgoutput::parse_lsn(&lsn).ok_or_else(|| OnlineError::Setup(format!("fence LSN {lsn:?}")))
    }

    async fn source_position(&mut self) -> Result<Position, OnlineError> {
        let row = self
            .client
            .query_one(
                "SELECT pg_current_wal_lsn()::text, pg_current_wal_flush_lsn()::text",
                &[],
            )
            .await
            .map_err(pg("read the source's position"))?;
        let lsn: String = row.get(0);
        let flushed: String = row.get(1);
        self.flushed = pgoutput::parse_lsn(&flushed).unwrap_or(0);
        pgoutput::parse_lsn(&lsn).ok_or_else(|| OnlineError::Setup(format!("source LSN {lsn:?}")))
    }

    async fn cleanup(&mut self) -> Result<(), OnlineError> {
        if let Some(stream) = self.stream.take() {
            stream.close().await;
        }
        // The walsender goes a moment after its client; the slot cannot be dropped before.
        for _ in 0..100 {
            let active: Option<bool> = self
                .client
                .query_opt(
                    "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
                    &[&self.names.slot],
                )
                .await
                .map_err(pg("look up the replication slot"))?
                .map(|r| r.get(0));
            if active != Some(true) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        drop_stream(&self.client, &self.names).await
    }

    fn position_text(p: Position) -> String {
        pgoutput::lsn_text(p)
    }
}

/// A field of a result row as PostgreSQL sent it (binary), whatever its type.
struct Raw<'a>(Option<&'a [u8]>);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(Some(raw)))
    }

    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(None))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// A table's conversion statements.
struct ConvertTable {
    /// Per attribute of the table's row type (its column order), the plan column it holds.
    attributes: Vec<Option<usize>>,
    /// Every row complete.
    full: tokio_postgres::Statement,
    /// Some rows with values not sent: filled from the source's current row.
    partial: tokio_postgres::Statement,
}

/// Turns row images into the copy's form: PostgreSQL casts each text value to its column's type
/// and evaluates the column's read expression, and the result arrives in binary, as the copy's
/// `COPY ... (FORMAT binary)` sends it. A value the stream did not carry (unchanged TOAST, a
/// stored generated column) is taken from the source's current row; a row no longer there is
/// left out (the stream carries its delete later). That is exact: any later change of the value
/// is in the stream after this one.
pub struct PgConverter {
    client: Client,
    /// None for a table whose columns no longer matched the plan's when it was prepared.
    tables: Vec<Option<ConvertTable>>,
    /// Per plan table, as it was planned.
    planned: Vec<PlannedTable>,
    /// Tables whose source columns changed, with the message naming them: their changes cannot
    /// be converted (the source's row type is no longer the one they were written in).
    drifted: std::collections::BTreeMap<usize, String>,
}

/// A plan table as the conversion's column check compares it: `schema.name`, every column the
/// source had, and the plan's columns with their types (`format_type`).
type PlannedTable = (String, Vec<String>, Vec<(String, String)>);

impl PgConverter {
    pub async fn connect(endpoint: &PgEndpoint, plan: &[PgToMssqlTablePlan]) -> Result<Self, OnlineError> {
        let client = endpoint.connect().await?;
        client
            .batch_execute(SESSION)
            .await
            .map_err(pg("session settings"))?;
        let planned: Vec<PlannedTable> = plan
            .iter()
            .map(|t| {
                (
                    format!("{}.{}", t.source.schema, t.source.name),
                    t.source.columns.iter().map(|c| c.name.clone()).collect(),
                    t.columns
                        .iter()
                        .map(|c| (c.source.name.clone(), c.source.formatted.clone()))
                        .collect(),
                )
            })
            .collect();
        let mut converter = PgConverter {
            client,
            tables: Vec::with_capacity(plan.len()),
            planned,
            drifted: std::collections::BTreeMap::new(),
        };
        for (i, t) in plan.iter().enumerate() {
            let prepared = if converter.check_columns(i).await? {
                Some(Self::prepare(&converter.client, t).await?)
            } else {
                None
            };
            converter.tables.push(prepared);
        }
        Ok(converter)
    }

    /// Tables whose source columns changed since the plan, with the message naming them.
    pub fn drifted(&self) -> &std::collections::BTreeMap<usize, String> {
        &self.drifted
    }

    /// Whether table `i`'s columns in the source are still the plan's (false: it drifted, and
    /// is recorded so).
    async fn check_columns(&mut self, i: usize) -> Result<bool, OnlineError> {
        if self.drifted.contains_key(&i) {
            return Ok(false);
        }
        let (name, planned, planned_types) = &self.planned[i];
        let Some((schema, table)) = name.split_once('.') else {
            return Ok(true);
        };
        let now: Vec<(String, String)> = self
            .client
            .query(
                "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
                 JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped",
                &[&schema, &table],
            )
            .await
            .map_err(pg("read the table's columns"))?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let added: Vec<&str> = now
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|c| !planned.iter().any(|p| p == c))
            .collect();
        let gone: Vec<&str> = planned
            .iter()
            .map(String::as_str)
            .filter(|c| !now.iter().any(|(n, _)| n == c))
            .collect();
        let retyped: Vec<String> = planned_types
            .iter()
            .filter_map(|(c, was)| {
                let (_, is) = now.iter().find(|(n, _)| n == c)?;
                (is != was).then(|| retyped_text(c, was, is))
            })
            .collect();
        match drift_message(name, &added, &gone, &retyped) {
            None => Ok(true),
            Some(message) => {
                tracing::warn!(%message, "table paused by a schema change");
                self.drifted.insert(i, message);
                Ok(false)
            }
        }
    }

    async fn prepare(client: &Client, t: &PgToMssqlTablePlan) -> Result<ConvertTable, OnlineError> {
        let table = format!("{}.{}", quote_pg(&t.source.schema), quote_pg(&t.source.name));
        let attnames: Vec<String> = client
            .query(
                "SELECT attname::text FROM pg_attribute WHERE attrelid = $1::text::regclass AND attnum > 0 \
                 AND NOT attisdropped ORDER BY attnum",
                &[&table],
            )
            .await
            .map_err(pg("read the table's columns"))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let attributes: Vec<Option<usize>> = attnames
            .iter()
            .map(|a| t.columns.iter().position(|c| &c.source.name == a))
            .collect();
        let captured = CaptureTable::of(t)?;
        let sql = convert_sql(t, &table, &attnames, &captured.key);
        let full = client
            .prepare(&sql.0)
            .await
            .map_err(pg("prepare the conversion of changes"))?;
        let partial = client
            .prepare(&sql.1)
            .await
            .map_err(pg("prepare the conversion of changes"))?;
        Ok(ConvertTable {
            attributes,
            full,
            partial,
        })
    }

    /// Converts `rows` of plan table `table`; `f` gets each one's fields in the copy's form
    /// (the plan's columns in order) and whether it is a delete. Returns how many rows.
    ///
    /// A table whose source columns changed converts nothing: its changes were written in a row
    /// type the source no longer has, and the table is paused (see [`Self::drifted`]).
    pub async fn convert<'r>(
        &mut self,
        table: usize,
        rows: impl Iterator<Item = &'r Op<PgRow>>,
        mut f: impl FnMut(bool, &[Option<&[u8]>]) -> Result<(), OnlineError>,
    ) -> Result<usize, OnlineError> {
        if !self.check_columns(table).await? {
            return Ok(0);
        }
        let Some(t) = &self.tables[table] else {
            return Ok(0);
        };
        let mut literal = String::from("{");
        let mut ops: Vec<&str> = Vec::new();
        let mut masks: Vec<Option<String>> = Vec::new();
        let mut partial = false;
        for (i, op) in rows.enumerate() {
            let (code, row) = match op {
                Op::Upsert(r) => ("U", r),
                Op::Delete(r) => ("D", r),
            };
            if i > 0 {
                literal.push(',');
            }
            record_literal(&t.attributes, row, &mut literal)?;
            ops.push(code);
            let mask = row.0.contains(&Field::Unchanged).then(|| {
                row.0
                    .iter()
                    .map(|f| if *f == Field::Unchanged { '1' } else { '0' })
                    .collect::<String>()
            });
            partial |= mask.is_some();
            masks.push(mask);
        }
        literal.push('}');
        if ops.is_empty() {
            return Ok(0);
        }
        let statement = if partial { &t.partial } else { &t.full };
        let params: [&(dyn ToSql + Sync); 3] = [&literal, &ops, &masks];
        let rows = self
            .client
            .query_raw(statement, params)
            .await
            .map_err(pg("convert changes"))?;
        futures_util::pin_mut!(rows);
        let mut n = 0usize;
        while let Some(row) = rows.try_next().await.map_err(pg("convert changes"))? {
            let mut fields: Vec<Option<&[u8]>> = Vec::with_capacity(row.len());
            for i in 0..row.len() {
                let Raw(v) = row.try_get(i).map_err(pg("convert changes"))?;
                fields.push(v);
            }
            let delete = fields.first().copied().flatten() == Some(b"D".as_slice());
            f(delete, &fields[1..])?;
            n += 1;
        }
        Ok(n)
    }
}

/// The conversion statements of a table (every row complete; some rows partial). `$1` is an
/// array literal of the table's row type, `$2` each row's operation, `$3` each row's mask of
/// values not sent.
fn convert_sql(t: &PgToMssqlTablePlan, table: &str, attnames: &[String], key: &[usize]) -> (String, String) {
    let aliases = attnames
        .iter()
        .map(|a| quote_pg(a))
        .collect::<Vec<_>>()
        .join(", ");
    let source = format!(
        "ROWS FROM (unnest($1::text::{table}[]), unnest($2::text[]), unnest($3::text[])) \
         AS v({aliases}, \"_mssqlpg_op\", \"_mssqlpg_m\")"
    );
    let reads = t
        .columns
        .iter()
        .map(|c| c.read_expr.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let full = format!("SELECT \"_mssqlpg_op\", {reads} FROM {source}");
    let filled = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let q = quote_pg(&c.source.name);
            format!(
                "CASE WHEN substr(v.\"_mssqlpg_m\", {}, 1) = '1' THEN cur.{q} ELSE v.{q} END AS {q}",
                i + 1
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let on = key
        .iter()
        .map(|&k| {
            let q = quote_pg(&t.columns[k].source.name);
            format!("cur.{q} = v.{q}")
        })
        .collect::<Vec<_>>()
        .join(" AND ");
    let first_key = key
        .first()
        .map(|&k| quote_pg(&t.columns[k].source.name))
        .unwrap_or_default();
    let partial = format!(
        "SELECT s.\"_mssqlpg_op\", {reads} FROM (SELECT v.\"_mssqlpg_op\", {filled} FROM {source} \
         LEFT JOIN {table} AS cur ON v.\"_mssqlpg_m\" IS NOT NULL AND {on} \
         WHERE v.\"_mssqlpg_m\" IS NULL OR cur.{first_key} IS NOT NULL) AS s"
    );
    (full, partial)
}

/// Appends one row as an element of an array literal of the table's row type: the record
/// literal (each value quoted, a NULL empty), quoted again as an array element.
fn record_literal(attributes: &[Option<usize>], row: &PgRow, out: &mut String) -> Result<(), OnlineError> {
    let mut record = String::from("(");
    for (i, at) in attributes.iter().enumerate() {
        if i > 0 {
            record.push(',');
        }
        if let Some(Field::Text(v)) = at.and_then(|c| row.0.get(c)) {
            let text = std::str::from_utf8(v).map_err(|_| {
                OnlineError::Setup(
                    "a changed value is not valid UTF-8 (the source database's encoding must be UTF8)".into(),
                )
            })?;
            record.push('"');
            escape_into(text, &mut record);
            record.push('"');
        }
    }
    record.push(')');
    out.push('"');
    escape_into(&record, out);
    out.push('"');
    Ok(())
}

/// Backslash-escapes `"` and `\` (the quoting of both record and array literals).
fn escape_into(s: &str, out: &mut String) {
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_postgres_and_keep_migrations_apart() {
        let a = SlotNames::of("tests/Orders-Online");
        assert!(a.slot.starts_with("mssqlpg_tests_orders_online_"), "{}", a.slot);
        assert!(a.slot.len() <= 63);
        assert_ne!(a, SlotNames::of("tests/orders-online"));
        let long = SlotNames::of(&"x".repeat(300));
        assert!(long.slot.len() <= 63, "{}", long.slot);
    }

    #[test]
    fn record_literals_quote_every_value_and_leave_nulls_empty() {
        let row = PgRow(vec![
            Field::Text(b"1".as_slice().into()),
            Field::Null,
            Field::Text(br#"a "quoted" \ back, (paren)"#.as_slice().into()),
            Field::Text(b"".as_slice().into()),
        ]);
        let mut out = String::new();
        // The row type has a column the plan does not hold (third attribute), written as NULL.
        record_literal(&[Some(0), Some(1), None, Some(2), Some(3)], &row, &mut out).unwrap();
        assert_eq!(out, r#""(\"1\",,,\"a \\\"quoted\\\" \\\\ back, (paren)\",\"\")""#);
    }

    #[test]
    fn a_column_whose_type_oid_or_typmod_changed_is_named_with_both_types() {
        let t = CaptureTable {
            schema: "s".into(),
            name: "t".into(),
            columns: vec!["id".into(), "v".into(), "n".into(), "at".into()],
            computed: vec![false; 4],
            key: vec![0],
            source_columns: vec!["id".into(), "v".into(), "n".into(), "at".into()],
            column_types: vec![
                "integer".into(),
                "character varying(50)".into(),
                "numeric(10,2)".into(),
                "timestamp(3) without time zone".into(),
            ],
        };
        let types: HashMap<(u32, i32), String> = [
            ((23, -1), "integer".to_string()),
            ((1043, 54), "character varying(50)".to_string()),
            ((1700, 655366), "numeric(10,2)".to_string()),
            ((1114, 3), "timestamp(3) without time zone".to_string()),
            ((20, -1), "bigint".to_string()),
        ]
        .into();
        let type_names: HashMap<u32, String> = [
            (1043, "character varying"),
            (1700, "numeric"),
            (1114, "timestamp without time zone"),
            (25, "text"),
        ]
        .into_iter()
        .map(|(o, n)| (o, n.to_string()))
        .collect();
        let column = |name: &str, type_oid: u32, type_modifier: i32| pgoutput::RelationColumn {
            key: false,
            name: name.into(),
            type_oid,
            type_modifier,
        };
        // The relation lists the columns in another order: each is found by name.
        let same = [
            column("v", 1043, 54),
            column("id", 23, -1),
            column("at", 1114, 3),
            column("n", 1700, 655366),
        ];
        let from = [Some(1), Some(0), Some(3), Some(2)];
        assert!(retyped_columns(&t, &from, &same, &types, &type_names).is_empty());
        let changed = [
            // A type another column had: named as the catalog named it.
            column("id", 20, -1),
            // Longer, more digits, more precision: new typmods, named from the OID's name.
            column("v", 1043, 204),
            column("n", 1700, (12 << 16 | 4) + 4),
            column("at", 1114, 6),
        ];
        let from = [Some(0), Some(1), Some(2), Some(3)];
        assert_eq!(
            retyped_columns(&t, &from, &changed, &types, &type_names),
            vec![
                "id from integer to bigint",
                "v from character varying(50) to character varying(200)",
                "n from numeric(10,2) to numeric(12,4)",
                "at from timestamp(3) without time zone to timestamp(6) without time zone",
            ]
        );
        assert_eq!(type_text(&type_names, 25, -1), "text");
        assert_eq!(type_text(&type_names, 99999, 7), "type 99999 (typmod 7)");
        let message = drift_message("s.t", &["x"], &[], &[retyped_text("v", "text", "integer")]).unwrap();
        assert!(
            message.starts_with(
                "table s.t paused: its columns changed in the source while streaming (added x; \
                 changed the type of v from text to integer)"
            ),
            "{message}"
        );
    }

    #[test]
    fn a_later_image_keeps_the_earlier_value_of_an_unchanged_field() {
        let earlier = PgRow(vec![
            Field::Text(b"1".as_slice().into()),
            Field::Text(b"big".as_slice().into()),
        ]);
        let later = PgRow(vec![Field::Text(b"1".as_slice().into()), Field::Unchanged]);
        assert_eq!(later.over(earlier.clone()), earlier);
    }
}
