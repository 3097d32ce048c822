//! Which way a Migration copies, and the one place that builds that direction's engine: the
//! command line and the Kubernetes steps hand their work to [`with_engine`] and are written once,
//! against [`Engine`].

use crate::engine::Engine;
use crate::mssql_to_pg::MssqlToPgEngine;
use crate::pg_to_mssql::PgToMssqlEngine;
use crate::pipeline::CopyOptions;
use crate::spec::{self, Credentials, SpecError};
use mssql_pg_crds::Migration;
use std::future::Future;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `source.mssql` + `target.postgres`.
    MssqlToPg,
    /// `source.postgres` + `target.mssql`.
    PgToMssql,
}

impl Direction {
    pub fn of(m: &Migration) -> Direction {
        if spec::is_pg_to_mssql(m) {
            Direction::PgToMssql
        } else {
            Direction::MssqlToPg
        }
    }
}

/// Work to do with a Migration's engine, whichever its direction.
pub trait WithEngine {
    type Output;
    fn run<E: Engine>(self, engine: E) -> impl Future<Output = Self::Output>;
}

/// Resolves the Migration's endpoints and options for its direction (`SOURCE_*` credentials are
/// the source's, `TARGET_*` the target's) and runs `work` with that direction's engine.
/// `fail_after_chunks` is the copy test hook.
pub async fn with_engine<W: WithEngine>(
    mig: &Migration,
    creds: Credentials,
    fail_after_chunks: Option<u64>,
    work: W,
) -> Result<W::Output, SpecError> {
    Ok(match Direction::of(mig) {
        Direction::MssqlToPg => {
            let (source, target, options) = spec::resolve(mig, creds)?;
            let copy = CopyOptions::new(&options, fail_after_chunks);
            work.run(MssqlToPgEngine {
                source,
                target,
                options,
                copy,
            })
            .await
        }
        Direction::PgToMssql => {
            let (source, target, options) = spec::resolve_pg_to_mssql(mig, creds)?;
            let copy = CopyOptions::new(&options, fail_after_chunks);
            work.run(PgToMssqlEngine {
                source,
                target,
                options,
                copy,
            })
            .await
        }
    })
}
