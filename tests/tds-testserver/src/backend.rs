//! What a connection runs its requests against: the SQL engine in production, and a scripted
//! stand-in in the wire layer's own tests (so framing, streaming and cancellation can be tested
//! whatever the engine supports yet).

use std::sync::Arc;

use tds_testserver_engine::catalog::ConnectionInfo;
use tds_testserver_engine::{
    ColumnMeta, Engine, Interrupt, Param, ResultSink, Session, SqlError, TransactionRequest, Value,
};

/// One connection's SQL session.
pub trait Backend: Send {
    fn database(&self) -> &str;
    fn execute_batch(&mut self, sql: &str, sink: &mut dyn ResultSink) -> Result<(), Interrupt>;
    fn execute_rpc(
        &mut self,
        sql: &str,
        params: &[Param],
        sink: &mut dyn ResultSink,
    ) -> Result<(), Interrupt>;
    fn transaction(
        &mut self,
        request: TransactionRequest,
        sink: &mut dyn ResultSink,
    ) -> Result<(), Interrupt>;
    fn bulk_start(&mut self, columns: &[ColumnMeta]) -> Result<(), SqlError>;
    /// One bulk row. The backend copies what it keeps, so the caller reuses the row's buffers.
    fn bulk_row(&mut self, row: &[Value]);
    fn bulk_finish(&mut self, sink: &mut dyn ResultSink) -> Result<(), Interrupt>;
    fn bulk_abort(&mut self);
    /// The login completed: what sys.dm_exec_connections/sys.dm_exec_sessions report for this
    /// connection (the negotiated packet size above all, which clients read back).
    fn register_connection(&mut self, _info: ConnectionInfo) {}
}

/// Opens a session per login. `database` is the login's database (`None`: the default).
pub trait Connector: Send + Sync {
    fn connect(&self, database: Option<&str>) -> Result<Box<dyn Backend>, SqlError>;
}

impl Backend for Session {
    fn database(&self) -> &str {
        Session::database(self)
    }
    fn execute_batch(&mut self, sql: &str, sink: &mut dyn ResultSink) -> Result<(), Interrupt> {
        Session::execute_batch(self, sql, sink)
    }
    fn execute_rpc(
        &mut self,
        sql: &str,
        params: &[Param],
        sink: &mut dyn ResultSink,
    ) -> Result<(), Interrupt> {
        Session::execute_rpc(self, sql, params, sink)
    }
    fn transaction(
        &mut self,
        request: TransactionRequest,
        sink: &mut dyn ResultSink,
    ) -> Result<(), Interrupt> {
        Session::transaction(self, request, sink)
    }
    fn bulk_start(&mut self, columns: &[ColumnMeta]) -> Result<(), SqlError> {
        Session::bulk_start(self, columns)
    }
    fn bulk_row(&mut self, row: &[Value]) {
        Session::bulk_row(self, row)
    }
    fn bulk_finish(&mut self, sink: &mut dyn ResultSink) -> Result<(), Interrupt> {
        Session::bulk_finish(self, sink)
    }
    fn bulk_abort(&mut self) {
        Session::bulk_abort(self)
    }
    fn register_connection(&mut self, info: ConnectionInfo) {
        Session::register_connection(self, info)
    }
}

/// The production connector: sessions of the shared engine.
pub struct EngineConnector(pub Arc<Engine>);

impl Connector for EngineConnector {
    fn connect(&self, database: Option<&str>) -> Result<Box<dyn Backend>, SqlError> {
        Ok(Box::new(self.0.connect(database)?))
    }
}
