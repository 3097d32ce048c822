//! A collecting sink and helpers shared by the engine's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;
use tds_testserver_engine::{
    ColumnMeta, Done, Engine, EngineConfig, EnvChange, Interrupt, Param, ResultSink, Session, SqlError,
    SqlType, Value,
};

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Columns(Vec<ColumnMeta>),
    Row(Vec<Value>),
    Done(Done),
    Error(SqlError),
    Info(i32, String),
    Env(EnvChange),
}

#[derive(Default)]
pub struct Sink {
    pub events: Vec<Event>,
}

impl ResultSink for Sink {
    fn columns(&mut self, columns: &[ColumnMeta]) -> Result<(), Interrupt> {
        self.events.push(Event::Columns(columns.to_vec()));
        Ok(())
    }
    fn row(&mut self, row: &[Value]) -> Result<(), Interrupt> {
        self.events.push(Event::Row(row.to_vec()));
        Ok(())
    }
    fn done(&mut self, done: Done) -> Result<(), Interrupt> {
        self.events.push(Event::Done(done));
        Ok(())
    }
    fn error(&mut self, error: &SqlError) -> Result<(), Interrupt> {
        self.events.push(Event::Error(error.clone()));
        Ok(())
    }
    fn info(&mut self, number: i32, message: &str) -> Result<(), Interrupt> {
        self.events.push(Event::Info(number, message.to_string()));
        Ok(())
    }
    fn env_change(&mut self, change: EnvChange) -> Result<(), Interrupt> {
        self.events.push(Event::Env(change));
        Ok(())
    }
}

impl Sink {
    pub fn errors(&self) -> Vec<SqlError> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Error(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }
    /// Informational messages (PRINT and the like), in order.
    #[allow(dead_code)]
    pub fn infos(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Info(_, m) => Some(m.clone()),
                _ => None,
            })
            .collect()
    }
    /// Result sets: (columns, rows).
    pub fn results(&self) -> Vec<(Vec<ColumnMeta>, Vec<Vec<Value>>)> {
        let mut out: Vec<(Vec<ColumnMeta>, Vec<Vec<Value>>)> = Vec::new();
        for e in &self.events {
            match e {
                Event::Columns(c) => out.push((c.clone(), Vec::new())),
                Event::Row(r) => out.last_mut().unwrap().1.push(r.clone()),
                _ => {}
            }
        }
        out
    }
    pub fn dones(&self) -> Vec<Done> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Done(d) => Some(*d),
                _ => None,
            })
            .collect()
    }
}

pub fn engine() -> Arc<Engine> {
    Engine::open(EngineConfig {
        data_dir: None,
        database: "testdb".to_string(),
        bulk_insert_dir: None,
    })
    .unwrap()
}

pub fn session() -> (Arc<Engine>, Session) {
    let e = engine();
    let s = e.connect(None).unwrap();
    (e, s)
}

/// Runs a batch and returns the sink.
pub fn run(s: &mut Session, sql: &str) -> Sink {
    let mut sink = Sink::default();
    s.execute_batch(sql, &mut sink).unwrap();
    sink
}

pub fn run_params(s: &mut Session, sql: &str, params: &[(SqlType, Value)]) -> Sink {
    let params: Vec<Param> = params
        .iter()
        .enumerate()
        .map(|(i, (ty, v))| Param {
            name: format!("@P{}", i + 1),
            ty: *ty,
            value: v.clone(),
        })
        .collect();
    let mut sink = Sink::default();
    s.execute_rpc(sql, &params, &mut sink).unwrap();
    sink
}

/// Runs a batch that must succeed and returns its last result set.
pub fn query(s: &mut Session, sql: &str) -> (Vec<ColumnMeta>, Vec<Vec<Value>>) {
    let sink = run(s, sql);
    assert!(sink.errors().is_empty(), "{sql}: {:?}", sink.errors());
    sink.results().pop().unwrap_or_default()
}

/// Runs a batch that must succeed.
pub fn exec(s: &mut Session, sql: &str) -> Sink {
    let sink = run(s, sql);
    assert!(sink.errors().is_empty(), "{sql}: {:?}", sink.errors());
    sink
}

/// Runs a batch that must fail and returns the first error.
pub fn error(s: &mut Session, sql: &str) -> SqlError {
    let sink = run(s, sql);
    sink.errors()
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("{sql}: no error"))
}

pub fn scalar(s: &mut Session, sql: &str) -> Value {
    let (_, rows) = query(s, sql);
    rows[0][0].clone()
}
