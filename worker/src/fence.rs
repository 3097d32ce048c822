//! One writer per unit of work: a fencing token that a process claims when it starts the work
//! and that every transaction committing the work's progress checks, in the same transaction.
//!
//! A claim raises the work's epoch by one and returns it ([`Fence`]). Each commit first runs
//! [`check_pg`] / [`check_mssql`] inside its transaction: an `UPDATE` of the fence row that only
//! matches while the row still holds this process's epoch. The `UPDATE` locks the row until the
//! transaction ends, so a newer claim waits for a commit in flight rather than slipping under it;
//! once a newer claim is in, an older process fails its next commit with [`TakenOver`] and its
//! transaction (rows and position alike) rolls back. Two processes copying the same task therefore
//! never both commit: whichever claimed last writes, the other stops.
//!
//! The copy tasks claim their task (`scope` = the migration, `name` = the task) and check it with
//! each chunk and its checkpoint; anything else that writes progress and a position together (an
//! apply stream's position) claims and checks the same way. A new run of a migration raises every
//! epoch of the migration at once ([`bump_pg`] / [`bump_mssql`]), which fences out every worker of
//! the run it replaces, including one that has not committed yet.
//!
//! The fence rows live next to the work's other state, in the target's `_mssqlpg` schema
//! (`fences`); the state stores create the table ([`pg_table`], [`mssql_table`]).

use std::sync::atomic::{AtomicBool, Ordering};

/// A claim on one unit of work: valid while the fence row holds `epoch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// What the work belongs to (the migration).
    pub scope: String,
    /// The work (a copy task's name).
    pub name: String,
    pub epoch: i64,
}

/// Another process claimed the work after this one did, or a new run of the migration replaced
/// the one this process planned for.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "task {name}: another worker took this task over{}; this worker stopped without committing more of it",
    match .current {
        Some(Claim::Newer(c)) => format!(
            ", or a new run of the migration began (the task's claim is {c} now, this worker's was {ours})"
        ),
        Some(Claim::NewRun) => ": a new run of the migration replaced the one this worker planned for (the plan \
                                ran again, or the Migration was deleted and applied again)".to_string(),
        None => format!(" (this worker's claim {ours} is gone)"),
    }
)]
pub struct TakenOver {
    pub name: String,
    pub ours: i64,
    /// What holds the work now (`None`: its fence row is gone).
    pub current: Option<Claim>,
}

/// What took the work over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// A claim with this epoch.
    Newer(i64),
    /// A new run of the migration.
    NewRun,
}

#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    #[error("fence of task {name} in PostgreSQL: {source}")]
    Pg {
        name: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("fence of task {name} in SQL Server: {source}")]
    Tds {
        name: String,
        #[source]
        source: Box<tiberius::error::Error>,
    },
    #[error("{0}")]
    TakenOver(#[source] TakenOver),
}

impl FenceError {
    pub fn taken_over(&self) -> Option<&TakenOver> {
        match self {
            FenceError::TakenOver(t) => Some(t),
            _ => None,
        }
    }
}

/// Set once a claim of this process was found taken over: the process's exit code says so
/// (`mssql_pg_crds::names::EXIT_TAKEN_OVER`), whatever error type carried it up.
static TAKEN_OVER: AtomicBool = AtomicBool::new(false);

/// Whether another worker took over work this process had claimed.
pub fn taken_over_in_this_process() -> bool {
    TAKEN_OVER.load(Ordering::Relaxed)
}

fn taken_over(fence: &Fence, current: Option<Claim>) -> FenceError {
    TAKEN_OVER.store(true, Ordering::Relaxed);
    FenceError::TakenOver(TakenOver {
        name: fence.name.clone(),
        ours: fence.epoch,
        current,
    })
}

/// The error of a claim made for a run that a new run of the migration has replaced since (the
/// caller compares the run it planned for with the one recorded after claiming).
pub fn run_replaced(fence: &Fence) -> FenceError {
    taken_over(fence, Some(Claim::NewRun))
}

/// `CREATE TABLE` of the fence table `table` in PostgreSQL (idempotent).
pub fn pg_table(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
            migration text NOT NULL,
            name text NOT NULL,
            epoch bigint NOT NULL,
            claimed_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (migration, name))"
    )
}

/// `CREATE TABLE` of the fence table `table` in SQL Server (run when it is missing).
pub fn mssql_table(table: &str, constraint: &str) -> String {
    format!(
        "CREATE TABLE {table} (migration nvarchar(400) NOT NULL, name nvarchar(400) NOT NULL, \
         epoch bigint NOT NULL, claimed_at datetime2(3) NOT NULL DEFAULT SYSUTCDATETIME(), \
         CONSTRAINT [{constraint}] PRIMARY KEY (migration, name))"
    )
}

fn pg_err(name: &str) -> impl Fn(tokio_postgres::Error) -> FenceError + '_ {
    move |source| FenceError::Pg {
        name: name.to_string(),
        source,
    }
}

fn tds_err(name: &str) -> impl Fn(tiberius::error::Error) -> FenceError + '_ {
    move |source| FenceError::Tds {
        name: name.to_string(),
        source: Box::new(source),
    }
}

/// Claims `name` of `scope` in PostgreSQL (outside any transaction: the claim must be visible to
/// the process it fences out).
pub async fn claim_pg(
    c: &impl tokio_postgres::GenericClient,
    table: &str,
    scope: &str,
    name: &str,
) -> Result<Fence, FenceError> {
    let row = c
        .query_one(
            &format!(
                "INSERT INTO {table} AS f (migration, name, epoch) VALUES ($1, $2, 1)
                 ON CONFLICT (migration, name) DO UPDATE SET epoch = f.epoch + 1, claimed_at = now()
                 RETURNING epoch"
            ),
            &[&scope, &name],
        )
        .await
        .map_err(pg_err(name))?;
    Ok(Fence {
        scope: scope.to_string(),
        name: name.to_string(),
        epoch: row.get(0),
    })
}

/// Inside a transaction of PostgreSQL: fails with [`TakenOver`] unless `fence` still holds, and
/// keeps a newer claim waiting until the transaction ends.
pub async fn check_pg(
    tx: &impl tokio_postgres::GenericClient,
    table: &str,
    fence: &Fence,
) -> Result<(), FenceError> {
    let matched = tx
        .execute(
            &format!("UPDATE {table} SET epoch = epoch WHERE migration = $1 AND name = $2 AND epoch = $3"),
            &[&fence.scope, &fence.name, &fence.epoch],
        )
        .await
        .map_err(pg_err(&fence.name))?;
    if matched == 1 {
        return Ok(());
    }
    let current = tx
        .query_opt(
            &format!("SELECT epoch FROM {table} WHERE migration = $1 AND name = $2"),
            &[&fence.scope, &fence.name],
        )
        .await
        .map_err(pg_err(&fence.name))?
        .map(|r| Claim::Newer(r.get::<_, i64>(0)));
    Err(taken_over(fence, current))
}

/// Raises every epoch of `scope`: every claim made before is fenced out.
pub async fn bump_pg(
    c: &impl tokio_postgres::GenericClient,
    table: &str,
    scope: &str,
) -> Result<(), FenceError> {
    c.execute(
        &format!("UPDATE {table} SET epoch = epoch + 1 WHERE migration = $1"),
        &[&scope],
    )
    .await
    .map_err(pg_err(scope))?;
    Ok(())
}

type Tds<S> = tiberius::Client<S>;

/// "Cannot insert duplicate key" (2627, 2601): a concurrent claim created the row first.
fn duplicate(e: &tiberius::error::Error) -> bool {
    matches!(e, tiberius::error::Error::Server(t) if t.code() == 2627 || t.code() == 2601)
}

/// [`claim_pg`] in SQL Server: the row is created when missing, then raised by one `UPDATE`
/// that returns the new epoch (atomic on its own, so two claims never get the same epoch).
pub async fn claim_mssql<S>(c: &mut Tds<S>, table: &str, scope: &str, name: &str) -> Result<Fence, FenceError>
where
    S: futures_util::AsyncRead + futures_util::AsyncWrite + Unpin + Send,
{
    let created = c
        .execute(
            format!(
                "INSERT INTO {table} (migration, name, epoch) SELECT @P1, @P2, 0 \
                 WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE migration = @P1 AND name = @P2)"
            ),
            &[&scope, &name],
        )
        .await;
    match created {
        Ok(_) => {}
        Err(e) if duplicate(&e) => {}
        Err(e) => return Err(tds_err(name)(e)),
    }
    let row = c
        .query(
            format!(
                "UPDATE {table} SET epoch = epoch + 1, claimed_at = SYSUTCDATETIME() OUTPUT inserted.epoch \
                 WHERE migration = @P1 AND name = @P2"
            ),
            &[&scope, &name],
        )
        .await
        .map_err(tds_err(name))?
        .into_row()
        .await
        .map_err(tds_err(name))?;
    let epoch = row.and_then(|r| r.get::<i64, _>(0)).unwrap_or(0);
    Ok(Fence {
        scope: scope.to_string(),
        name: name.to_string(),
        epoch,
    })
}

/// [`check_pg`] in SQL Server, inside the chunk's transaction.
pub async fn check_mssql<S>(c: &mut Tds<S>, table: &str, fence: &Fence) -> Result<(), FenceError>
where
    S: futures_util::AsyncRead + futures_util::AsyncWrite + Unpin + Send,
{
    let matched = c
        .execute(
            format!("UPDATE {table} SET epoch = epoch WHERE migration = @P1 AND name = @P2 AND epoch = @P3"),
            &[&fence.scope.as_str(), &fence.name.as_str(), &fence.epoch],
        )
        .await
        .map_err(tds_err(&fence.name))?
        .total();
    if matched == 1 {
        return Ok(());
    }
    let current = c
        .query(
            format!("SELECT epoch FROM {table} WHERE migration = @P1 AND name = @P2"),
            &[&fence.scope.as_str(), &fence.name.as_str()],
        )
        .await
        .map_err(tds_err(&fence.name))?
        .into_row()
        .await
        .map_err(tds_err(&fence.name))?
        .and_then(|r| r.get::<i64, _>(0))
        .map(Claim::Newer);
    Err(taken_over(fence, current))
}

/// [`bump_pg`] in SQL Server.
pub async fn bump_mssql<S>(c: &mut Tds<S>, table: &str, scope: &str) -> Result<(), FenceError>
where
    S: futures_util::AsyncRead + futures_util::AsyncWrite + Unpin + Send,
{
    c.execute(
        format!("UPDATE {table} SET epoch = epoch + 1 WHERE migration = @P1"),
        &[&scope],
    )
    .await
    .map_err(tds_err(scope))?;
    Ok(())
}
