//! The [`ResultSink`] that encodes engine events as TDS tokens straight into the outgoing
//! packet buffer, holding back each statement's DONE until it knows whether more follows.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use tds_testserver_engine::{
    ColumnMeta, Done, EnvChange, Interrupt, ResultSink, SqlError, StatementKind, Value,
};

use crate::wire::packet::PacketWriter;
use crate::wire::tokens::{self, DONE_ATTN, DONE_COUNT, DONE_ERROR, DONE_INXACT, DONE_MORE};
use crate::wire::type_info::WireType;

/// How the reply ends: a batch's last DONE, or an RPC's RETURNSTATUS + DONEPROC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyKind {
    Batch,
    Rpc,
}

pub struct WireSink<'a, W: Write> {
    w: &'a mut PacketWriter<W>,
    cancel: &'a AtomicBool,
    kind: ReplyKind,
    types: Vec<WireType>,
    pending: Option<Done>,
    any_error: bool,
    cancelled: bool,
    io_error: Option<io::ErrorKind>,
}

fn curcmd(kind: StatementKind) -> u16 {
    match kind {
        StatementKind::Select => 0xC1,
        StatementKind::Insert => 0xC3,
        StatementKind::Delete => 0xC4,
        StatementKind::Update => 0xC5,
        StatementKind::Merge => 0x117,
        StatementKind::Other => 0x00,
    }
}

impl<'a, W: Write> WireSink<'a, W> {
    pub fn new(w: &'a mut PacketWriter<W>, cancel: &'a AtomicBool, kind: ReplyKind) -> Self {
        WireSink {
            w,
            cancel,
            kind,
            types: Vec::new(),
            pending: None,
            any_error: false,
            cancelled: false,
            io_error: None,
        }
    }

    fn done_token(&self) -> u8 {
        match self.kind {
            ReplyKind::Batch => tokens::TOKEN_DONE,
            ReplyKind::Rpc => tokens::TOKEN_DONEINPROC,
        }
    }

    fn write_done(&mut self, d: Done, more: bool) {
        let mut status = 0;
        if more {
            status |= DONE_MORE;
        }
        if d.rows.is_some() {
            status |= DONE_COUNT;
        }
        if d.error {
            status |= DONE_ERROR;
        }
        if d.in_transaction {
            status |= DONE_INXACT;
        }
        let token = self.done_token();
        tokens::done(self.w.buf(), token, status, curcmd(d.kind), d.rows.unwrap_or(0));
    }

    /// Something follows the held DONE, so it gets DONE_MORE.
    fn release_pending(&mut self) {
        if let Some(d) = self.pending.take() {
            self.write_done(d, true);
        }
    }

    fn check(&mut self) -> Result<(), Interrupt> {
        if let Some(kind) = self.io_error {
            return Err(Interrupt::Io(io::Error::from(kind)));
        }
        if self.cancelled {
            return Err(Interrupt::Cancelled);
        }
        // A plain load first: the swap is a locked read-modify-write, and this runs per row.
        if self.cancel.load(Ordering::Acquire) && self.cancel.swap(false, Ordering::AcqRel) {
            self.cancelled = true;
            return Err(Interrupt::Cancelled);
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Interrupt> {
        self.w.flush_full().map_err(|e| {
            self.io_error = Some(e.kind());
            Interrupt::Io(e)
        })
    }

    /// Ends the reply. `Err` only when the connection is gone.
    pub fn finish(mut self, outcome: Result<(), Interrupt>) -> io::Result<()> {
        if let Some(kind) = self.io_error {
            return Err(io::Error::from(kind));
        }
        if let Err(Interrupt::Io(e)) = outcome {
            return Err(e);
        }
        if self.cancelled || matches!(outcome, Err(Interrupt::Cancelled)) {
            // The request was cancelled: whatever was sent, the reply ends with DONE(ATTN).
            self.release_pending();
            tokens::done(self.w.buf(), tokens::TOKEN_DONE, DONE_ATTN, 0, 0);
            return self.w.finish();
        }
        match self.kind {
            ReplyKind::Batch => match self.pending.take() {
                Some(d) => self.write_done(d, false),
                None => {
                    let status = if self.any_error { DONE_ERROR } else { 0 };
                    tokens::done(self.w.buf(), tokens::TOKEN_DONE, status, 0, 0);
                }
            },
            ReplyKind::Rpc => {
                self.release_pending();
                tokens::return_status(self.w.buf(), 0);
                let status = if self.any_error { DONE_ERROR } else { 0 };
                tokens::done(self.w.buf(), tokens::TOKEN_DONEPROC, status, 0xE0, 0);
            }
        }
        self.w.finish()
    }
}

impl<W: Write> ResultSink for WireSink<'_, W> {
    fn columns(&mut self, columns: &[ColumnMeta]) -> Result<(), Interrupt> {
        self.check()?;
        self.release_pending();
        let utf8 = self.w.client_utf8();
        self.types = tokens::colmetadata(self.w.buf(), columns, utf8);
        self.flush()
    }

    fn row(&mut self, row: &[Value]) -> Result<(), Interrupt> {
        self.check()?;
        self.release_pending();
        if let Err(e) = tokens::row(self.w.buf(), &self.types, row) {
            // The engine produced a value its own column type cannot carry: tell the client
            // rather than send a corrupt row or drop it silently.
            self.any_error = true;
            let text = format!("tds-testserver could not encode a result row: {e}");
            tokens::message(self.w.buf(), tokens::TOKEN_ERROR, 50000, 1, 16, &text, 1);
        }
        self.flush()
    }

    fn done(&mut self, done: Done) -> Result<(), Interrupt> {
        if self.io_error.is_some() || self.cancelled {
            return self.check();
        }
        self.release_pending();
        self.any_error |= done.error;
        self.pending = Some(done);
        self.flush()
    }

    fn error(&mut self, error: &SqlError) -> Result<(), Interrupt> {
        if self.io_error.is_some() || self.cancelled {
            return self.check();
        }
        self.release_pending();
        self.any_error = true;
        for e in std::iter::once(error).chain(error.followed_by.iter()) {
            let token = if e.class <= 10 {
                tokens::TOKEN_INFO
            } else {
                tokens::TOKEN_ERROR
            };
            tokens::message(
                self.w.buf(),
                token,
                e.number,
                e.state,
                e.class,
                &e.message,
                e.line,
            );
        }
        self.flush()
    }

    fn info(&mut self, number: i32, message: &str) -> Result<(), Interrupt> {
        if self.io_error.is_some() || self.cancelled {
            return self.check();
        }
        self.release_pending();
        tokens::message(self.w.buf(), tokens::TOKEN_INFO, number, 1, 0, message, 1);
        self.flush()
    }

    fn env_change(&mut self, change: EnvChange) -> Result<(), Interrupt> {
        if self.io_error.is_some() || self.cancelled {
            return self.check();
        }
        self.release_pending();
        let buf = self.w.buf();
        match change {
            EnvChange::Database { new, old } => tokens::env_string(buf, 1, &new, &old),
            EnvChange::BeginTransaction(d) => tokens::env_bytes(buf, 8, &d.to_le_bytes(), &[]),
            EnvChange::CommitTransaction(d) => tokens::env_bytes(buf, 9, &[], &d.to_le_bytes()),
            EnvChange::RollbackTransaction(d) => tokens::env_bytes(buf, 10, &[], &d.to_le_bytes()),
        }
        self.flush()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::wire::packet::read_packet;
    use tds_testserver_engine::SqlType;

    fn done(kind: StatementKind, rows: Option<u64>) -> Done {
        Done {
            kind,
            rows,
            error: false,
            in_transaction: false,
        }
    }

    fn payload(bytes: &[u8]) -> Vec<u8> {
        let mut r = bytes;
        let mut out = Vec::new();
        while let Some(p) = read_packet(&mut r).unwrap() {
            out.extend(p.payload);
        }
        out
    }

    #[test]
    fn batch_dones_get_more_except_the_last() {
        let mut w = PacketWriter::new(Vec::new(), 4096, 0);
        let cancel = AtomicBool::new(false);
        let mut s = WireSink::new(&mut w, &cancel, ReplyKind::Batch);
        s.done(done(StatementKind::Insert, Some(2))).unwrap();
        s.done(done(StatementKind::Other, None)).unwrap();
        s.finish(Ok(())).unwrap();
        let mut want = Vec::new();
        tokens::done(&mut want, 0xFD, DONE_MORE | DONE_COUNT, 0xC3, 2);
        tokens::done(&mut want, 0xFD, 0, 0, 0);
        assert_eq!(payload(&w_out(w)), want);
    }

    fn w_out(w: PacketWriter<Vec<u8>>) -> Vec<u8> {
        w.into_inner()
    }

    #[test]
    fn rpc_reply_ends_with_returnstatus_and_doneproc() {
        let mut w = PacketWriter::new(Vec::new(), 4096, 0);
        let cancel = AtomicBool::new(false);
        let mut s = WireSink::new(&mut w, &cancel, ReplyKind::Rpc);
        s.columns(&[ColumnMeta::expr("", SqlType::Int)]).unwrap();
        s.row(&[Value::Int(1)]).unwrap();
        s.done(done(StatementKind::Select, Some(1))).unwrap();
        s.finish(Ok(())).unwrap();
        let p = payload(&w_out(w));
        let mut tail = Vec::new();
        tokens::done(&mut tail, 0xFF, DONE_MORE | DONE_COUNT, 0xC1, 1);
        tokens::return_status(&mut tail, 0);
        tokens::done(&mut tail, 0xFE, 0, 0xE0, 0);
        assert!(p.ends_with(&tail));
    }

    #[test]
    fn cancel_stops_rows_and_ends_with_attn() {
        let mut w = PacketWriter::new(Vec::new(), 512, 0);
        let cancel = AtomicBool::new(false);
        let mut s = WireSink::new(&mut w, &cancel, ReplyKind::Batch);
        s.columns(&[ColumnMeta::expr("", SqlType::Int)]).unwrap();
        s.row(&[Value::Int(1)]).unwrap();
        cancel.store(true, Ordering::SeqCst);
        assert!(matches!(s.row(&[Value::Int(2)]), Err(Interrupt::Cancelled)));
        assert!(matches!(
            s.done(done(StatementKind::Select, Some(2))),
            Err(Interrupt::Cancelled)
        ));
        s.finish(Err(Interrupt::Cancelled)).unwrap();
        assert!(!cancel.load(Ordering::SeqCst));
        let p = payload(&w_out(w));
        let mut tail = Vec::new();
        tokens::done(&mut tail, 0xFD, DONE_ATTN, 0, 0);
        assert!(p.ends_with(&tail));
        assert_eq!(p.iter().filter(|&&b| b == 0xD1).count(), 1);
    }
}
