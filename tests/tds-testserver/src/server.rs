//! `TestServer`: the listener, its accept thread, and the set of live connections.

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

use tds_testserver_engine::{Engine, EngineConfig, SqlError};
use thiserror::Error;
use tracing::{info, warn};

use crate::ServerConfig;
use crate::backend::{Connector, EngineConnector};
use crate::session;
use crate::tls::{self, ServerTls, TlsError};

#[derive(Debug, Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot open the engine: {0}")]
    Engine(#[from] SqlError),
    #[error("cannot start the accept thread: {0}")]
    Thread(std::io::Error),
    #[error("max_packet_size {0} is outside 512..=32767")]
    PacketSize(u32),
    #[error(transparent)]
    Tls(#[from] TlsError),
}

type Connections = Arc<Mutex<HashMap<u64, TcpStream>>>;

/// A running server. Dropping it stops accepting and closes every connection.
pub struct TestServer {
    addr: SocketAddr,
    engine: Arc<Engine>,
    stopping: Arc<AtomicBool>,
    connections: Connections,
    accept: Option<JoinHandle<()>>,
    /// What [`TestServer::restart`] listens with again.
    again: (Arc<ServerConfig>, Option<Arc<ServerTls>>, Arc<dyn Connector>),
}

impl TestServer {
    /// Binds, starts accepting, and returns once connections are accepted.
    pub fn start(config: ServerConfig) -> Result<TestServer, ServerError> {
        let engine = Engine::open(EngineConfig {
            data_dir: config.data_dir.clone(),
            database: config.database.clone(),
            bulk_insert_dir: config.bulk_insert_dir.clone(),
        })?;
        let connector = Arc::new(EngineConnector(Arc::clone(&engine)));
        Self::start_with(config, engine, connector)
    }

    /// Like [`TestServer::start`], but sessions come from `connector` (the wire layer's tests
    /// use a scripted backend). `engine` is still what [`TestServer::engine`] returns.
    #[doc(hidden)]
    pub fn start_with(
        config: ServerConfig,
        engine: Arc<Engine>,
        connector: Arc<dyn Connector>,
    ) -> Result<TestServer, ServerError> {
        if !(512..=32767).contains(&config.max_packet_size) {
            return Err(ServerError::PacketSize(config.max_packet_size));
        }
        if config.force_encryption && config.tls.is_none() {
            return Err(TlsError::ForcedWithoutCert.into());
        }
        let tls = match &config.tls {
            Some(files) => Some(Arc::new(ServerTls {
                config: tls::server_config(files)?,
                forced: config.force_encryption,
            })),
            None => None,
        };
        let config_has_tls = tls.is_some();
        let listener = TcpListener::bind(config.listen).map_err(|source| ServerError::Bind {
            addr: config.listen,
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: config.listen,
            source,
        })?;
        let stopping = Arc::new(AtomicBool::new(false));
        let connections: Connections = Arc::default();
        let again = (Arc::new(config), tls, connector);
        let accept = spawn_accept(listener, &again, &stopping, &connections)?;
        info!(%addr, tls = config_has_tls, "tds-testserver listening");
        Ok(TestServer {
            addr,
            engine,
            stopping,
            connections,
            accept: Some(accept),
            again,
        })
    }

    /// Stops as [`TestServer::stop`] does (every connection closed, its session ended as on a
    /// disconnect), then listens again on the same address over the same data: a database
    /// restart as its clients see it.
    pub fn restart(&mut self) -> Result<(), ServerError> {
        self.stop();
        let listener = TcpListener::bind(self.addr).map_err(|source| ServerError::Bind {
            addr: self.addr,
            source,
        })?;
        self.stopping = Arc::new(AtomicBool::new(false));
        self.accept = Some(spawn_accept(
            listener,
            &self.again,
            &self.stopping,
            &self.connections,
        )?);
        info!(addr = %self.addr, "tds-testserver listening again");
        Ok(())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Stops accepting and closes all connections (their sessions end as on a disconnect).
    pub fn stop(&mut self) {
        if self.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the blocking accept() with a throw-away connection.
        let _ = TcpStream::connect(self.addr);
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
        if let Ok(conns) = self.connections.lock() {
            for stream in conns.values() {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn spawn_accept(
    listener: TcpListener,
    again: &(Arc<ServerConfig>, Option<Arc<ServerTls>>, Arc<dyn Connector>),
    stopping: &Arc<AtomicBool>,
    connections: &Connections,
) -> Result<JoinHandle<()>, ServerError> {
    let (config, tls, connector) = (Arc::clone(&again.0), again.1.clone(), Arc::clone(&again.2));
    let (stopping, connections) = (Arc::clone(stopping), Arc::clone(connections));
    thread::Builder::new()
        .name("tds-accept".into())
        .spawn(move || accept_loop(listener, config, tls, connector, stopping, connections))
        .map_err(ServerError::Thread)
}

fn accept_loop(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    tls: Option<Arc<ServerTls>>,
    connector: Arc<dyn Connector>,
    stopping: Arc<AtomicBool>,
    connections: Connections,
) {
    let next_spid = AtomicU16::new(51);
    let mut next_id = 0u64;
    for stream in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "accept failed");
                continue;
            }
        };
        let id = next_id;
        next_id += 1;
        match (stream.try_clone(), connections.lock()) {
            (Ok(clone), Ok(mut conns)) => {
                conns.insert(id, clone);
            }
            _ => continue,
        }
        let spid = next_spid.fetch_add(1, Ordering::Relaxed);
        let config = Arc::clone(&config);
        let tls = tls.clone();
        let connector = Arc::clone(&connector);
        let connections = Arc::clone(&connections);
        let spawned = thread::Builder::new()
            .name(format!("tds-conn-{spid}"))
            .spawn(move || {
                session::serve(stream, config, tls, connector, spid);
                if let Ok(mut conns) = connections.lock() {
                    conns.remove(&id);
                }
            });
        if let Err(e) = spawned {
            warn!(error = %e, "cannot start a connection thread");
        }
    }
}
