//! PostgreSQL's logical replication protocol as the `pgoutput` plugin writes it (protocol version
//! 1, the `messages` option on): one message per decoded row of
//! `pg_logical_slot_peek_binary_changes`. Decoding only, no I/O; values stay borrowed from the
//! message.

/// Microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
pub const PG_EPOCH_UNIX_MICROS: i64 = 946_684_800_000_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed pgoutput message ({what}) at byte {at}")]
pub struct Malformed {
    pub what: &'static str,
    pub at: usize,
}

/// One column value of a tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datum<'a> {
    Null,
    /// A TOASTed value the change left as it was: pgoutput does not send it, and it must not
    /// overwrite the target's.
    Unchanged,
    /// The value in the type's text form.
    Text(&'a [u8]),
    /// The value in the type's binary (send) form (the `binary` option).
    Binary(&'a [u8]),
}

/// The old row an UPDATE or DELETE carries: its replica identity key (`K`) or, under
/// `REPLICA IDENTITY FULL`, the whole row (`O`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OldKind {
    Key,
    Full,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationColumn {
    /// Part of the replica identity.
    pub key: bool,
    pub name: String,
    pub type_oid: u32,
    pub type_modifier: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub id: u32,
    /// Empty for `pg_catalog`.
    pub namespace: String,
    pub name: String,
    /// `d` default, `n` nothing, `f` full, `i` index.
    pub replica_identity: u8,
    pub columns: Vec<RelationColumn>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<'a> {
    Begin {
        /// The LSN of the transaction's commit record.
        final_lsn: u64,
        /// Microseconds since 2000-01-01.
        commit_time: i64,
        xid: u32,
    },
    Commit {
        commit_lsn: u64,
        /// The LSN just past the commit record: where a reader that applied the transaction
        /// continues.
        end_lsn: u64,
        commit_time: i64,
    },
    Origin,
    Relation(Relation),
    Type,
    Insert {
        relation: u32,
        new: Vec<Datum<'a>>,
    },
    Update {
        relation: u32,
        old: Option<(OldKind, Vec<Datum<'a>>)>,
        new: Vec<Datum<'a>>,
    },
    Delete {
        relation: u32,
        old: (OldKind, Vec<Datum<'a>>),
    },
    Truncate {
        relations: Vec<u32>,
    },
    /// `pg_logical_emit_message`: inside a transaction when `transactional`, else on its own.
    Message {
        transactional: bool,
        lsn: u64,
        prefix: &'a str,
        content: &'a [u8],
    },
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Malformed> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(Malformed { what, at: self.at });
        };
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, Malformed> {
        Ok(self.take(1, what)?[0])
    }

    fn i16(&mut self, what: &'static str) -> Result<i16, Malformed> {
        let s = self.take(2, what)?;
        Ok(i16::from_be_bytes([s[0], s[1]]))
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, Malformed> {
        let s = self.take(4, what)?;
        Ok(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, Malformed> {
        Ok(self.i32(what)? as u32)
    }

    fn i64(&mut self, what: &'static str) -> Result<i64, Malformed> {
        let s = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(i64::from_be_bytes(a))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, Malformed> {
        Ok(self.i64(what)? as u64)
    }

    /// A NUL-terminated string.
    fn cstr(&mut self, what: &'static str) -> Result<&'a str, Malformed> {
        let rest = &self.b[self.at..];
        let Some(len) = rest.iter().position(|&c| c == 0) else {
            return Err(Malformed { what, at: self.at });
        };
        let s = std::str::from_utf8(&rest[..len]).map_err(|_| Malformed { what, at: self.at })?;
        self.at += len + 1;
        Ok(s)
    }

    fn tuple(&mut self) -> Result<Vec<Datum<'a>>, Malformed> {
        let n = self.i16("tuple column count")?;
        if n < 0 {
            return Err(Malformed {
                what: "tuple column count",
                at: self.at - 2,
            });
        }
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            out.push(match self.u8("tuple column kind")? {
                b'n' => Datum::Null,
                b'u' => Datum::Unchanged,
                kind @ (b't' | b'b') => {
                    let len = self.i32("value length")?;
                    let len = usize::try_from(len).map_err(|_| Malformed {
                        what: "value length",
                        at: self.at - 4,
                    })?;
                    let v = self.take(len, "value")?;
                    if kind == b't' {
                        Datum::Text(v)
                    } else {
                        Datum::Binary(v)
                    }
                }
                _ => {
                    return Err(Malformed {
                        what: "tuple column kind",
                        at: self.at - 1,
                    });
                }
            });
        }
        Ok(out)
    }

    fn old_tuple(&mut self, kind: u8) -> Result<(OldKind, Vec<Datum<'a>>), Malformed> {
        let k = match kind {
            b'K' => OldKind::Key,
            b'O' => OldKind::Full,
            _ => {
                return Err(Malformed {
                    what: "old tuple kind",
                    at: self.at - 1,
                });
            }
        };
        Ok((k, self.tuple()?))
    }

    fn expect(&mut self, byte: u8, what: &'static str) -> Result<(), Malformed> {
        if self.u8(what)? == byte {
            Ok(())
        } else {
            Err(Malformed {
                what,
                at: self.at - 1,
            })
        }
    }
}

/// Decodes one pgoutput message. Trailing bytes are an error: a message is one row of the
/// decoding functions' output.
pub fn decode(b: &[u8]) -> Result<Message<'_>, Malformed> {
    let mut r = Reader { b, at: 0 };
    let m = match r.u8("message type")? {
        b'B' => Message::Begin {
            final_lsn: r.u64("begin final LSN")?,
            commit_time: r.i64("begin commit time")?,
            xid: r.u32("begin xid")?,
        },
        b'C' => {
            r.u8("commit flags")?;
            Message::Commit {
                commit_lsn: r.u64("commit LSN")?,
                end_lsn: r.u64("commit end LSN")?,
                commit_time: r.i64("commit time")?,
            }
        }
        b'O' => {
            r.u64("origin LSN")?;
            r.cstr("origin name")?;
            Message::Origin
        }
        b'R' => {
            let id = r.u32("relation id")?;
            let namespace = r.cstr("relation namespace")?.to_string();
            let name = r.cstr("relation name")?.to_string();
            let replica_identity = r.u8("replica identity")?;
            let n = r.i16("relation column count")?.max(0) as usize;
            let mut columns = Vec::with_capacity(n);
            for _ in 0..n {
                let flags = r.u8("column flags")?;
                columns.push(RelationColumn {
                    key: flags & 1 == 1,
                    name: r.cstr("column name")?.to_string(),
                    type_oid: r.u32("column type")?,
                    type_modifier: r.i32("column type modifier")?,
                });
            }
            Message::Relation(Relation {
                id,
                namespace,
                name,
                replica_identity,
                columns,
            })
        }
        b'Y' => {
            r.u32("type id")?;
            r.cstr("type namespace")?;
            r.cstr("type name")?;
            Message::Type
        }
        b'I' => {
            let relation = r.u32("insert relation")?;
            r.expect(b'N', "insert new tuple marker")?;
            Message::Insert {
                relation,
                new: r.tuple()?,
            }
        }
        b'U' => {
            let relation = r.u32("update relation")?;
            let (old, new) = match r.u8("update tuple marker")? {
                b'N' => (None, r.tuple()?),
                kind => {
                    let old = r.old_tuple(kind)?;
                    r.expect(b'N', "update new tuple marker")?;
                    (Some(old), r.tuple()?)
                }
            };
            Message::Update { relation, old, new }
        }
        b'D' => {
            let relation = r.u32("delete relation")?;
            let kind = r.u8("delete tuple marker")?;
            Message::Delete {
                relation,
                old: r.old_tuple(kind)?,
            }
        }
        b'T' => {
            let n = r.i32("truncate relation count")?.max(0) as usize;
            r.u8("truncate options")?;
            let relations = (0..n)
                .map(|_| r.u32("truncate relation"))
                .collect::<Result<_, _>>()?;
            Message::Truncate { relations }
        }
        b'M' => {
            let transactional = r.u8("message flags")? & 1 == 1;
            let lsn = r.u64("message LSN")?;
            let prefix = r.cstr("message prefix")?;
            let len = usize::try_from(r.i32("message length")?).map_err(|_| Malformed {
                what: "message length",
                at: r.at - 4,
            })?;
            Message::Message {
                transactional,
                lsn,
                prefix,
                content: r.take(len, "message content")?,
            }
        }
        _ => {
            return Err(Malformed {
                what: "message type",
                at: 0,
            });
        }
    };
    if r.at != b.len() {
        return Err(Malformed {
            what: "trailing bytes",
            at: r.at,
        });
    }
    Ok(m)
}

/// An LSN as PostgreSQL writes it (`16/B374D848`).
pub fn lsn_text(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

/// An LSN from PostgreSQL's text form.
pub fn parse_lsn(text: &str) -> Option<u64> {
    let (hi, lo) = text.trim().split_once('/')?;
    let hi = u64::from_str_radix(hi, 16).ok()?;
    let lo = u64::from_str_radix(lo, 16).ok()?;
    (hi <= u64::from(u32::MAX) && lo <= u64::from(u32::MAX)).then_some((hi << 32) | lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds messages the way pgoutput writes them.
    #[derive(Default)]
    struct W(Vec<u8>);

    impl W {
        fn u8(mut self, v: u8) -> Self {
            self.0.push(v);
            self
        }
        fn i16(mut self, v: i16) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn i32(mut self, v: i32) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn i64(mut self, v: i64) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn s(mut self, v: &str) -> Self {
            self.0.extend_from_slice(v.as_bytes());
            self.0.push(0);
            self
        }
        fn text(self, v: &str) -> Self {
            let mut w = self.u8(b't').i32(v.len() as i32);
            w.0.extend_from_slice(v.as_bytes());
            w
        }
    }

    #[test]
    fn transaction_framing_and_lsns() {
        let begin = W::default().u8(b'B').i64(0x1_5050_5D00).i64(42).i32(726).0;
        assert_eq!(
            decode(&begin),
            Ok(Message::Begin {
                final_lsn: 0x1_5050_5D00,
                commit_time: 42,
                xid: 726
            })
        );
        let commit = W::default()
            .u8(b'C')
            .u8(0)
            .i64(0x150505D)
            .i64(0x1505D30)
            .i64(43)
            .0;
        assert_eq!(
            decode(&commit),
            Ok(Message::Commit {
                commit_lsn: 0x150505D,
                end_lsn: 0x1505D30,
                commit_time: 43
            })
        );
        assert_eq!(lsn_text(0x16_B374_D848), "16/B374D848");
        assert_eq!(parse_lsn("16/B374D848"), Some(0x16_B374_D848));
        assert_eq!(parse_lsn("0/0"), Some(0));
        assert_eq!(parse_lsn("x/1"), None);
    }

    #[test]
    fn relation_lists_columns_and_key() {
        let rel = W::default()
            .u8(b'R')
            .i32(16384)
            .s("public")
            .s("t1")
            .u8(b'd')
            .i16(2)
            .u8(1)
            .s("id")
            .i32(23)
            .i32(-1)
            .u8(0)
            .s("näme")
            .i32(1043)
            .i32(24)
            .0;
        let Ok(Message::Relation(r)) = decode(&rel) else {
            panic!("{:?}", decode(&rel))
        };
        assert_eq!(
            (r.id, r.namespace.as_str(), r.name.as_str()),
            (16384, "public", "t1")
        );
        assert_eq!(r.replica_identity, b'd');
        assert_eq!(r.columns.len(), 2);
        assert!(r.columns[0].key && !r.columns[1].key);
        assert_eq!(r.columns[1].name, "näme");
        assert_eq!((r.columns[1].type_oid, r.columns[1].type_modifier), (1043, 24));
    }

    #[test]
    fn row_changes_keep_null_unchanged_and_text_apart() {
        let insert = W::default()
            .u8(b'I')
            .i32(7)
            .u8(b'N')
            .i16(3)
            .text("1")
            .u8(b'n')
            .text("")
            .0;
        assert_eq!(
            decode(&insert),
            Ok(Message::Insert {
                relation: 7,
                new: vec![Datum::Text(b"1"), Datum::Null, Datum::Text(b"")]
            })
        );
        // A key update: old key, then the new row with an unchanged TOASTed value.
        let update = W::default()
            .u8(b'U')
            .i32(7)
            .u8(b'K')
            .i16(3)
            .text("1")
            .u8(b'n')
            .u8(b'n')
            .u8(b'N')
            .i16(3)
            .text("2")
            .text("x")
            .u8(b'u')
            .0;
        assert_eq!(
            decode(&update),
            Ok(Message::Update {
                relation: 7,
                old: Some((OldKind::Key, vec![Datum::Text(b"1"), Datum::Null, Datum::Null])),
                new: vec![Datum::Text(b"2"), Datum::Text(b"x"), Datum::Unchanged]
            })
        );
        let plain = W::default().u8(b'U').i32(7).u8(b'N').i16(1).text("5").0;
        assert!(matches!(decode(&plain), Ok(Message::Update { old: None, .. })));
        let delete = W::default().u8(b'D').i32(7).u8(b'O').i16(1).text("5").0;
        assert_eq!(
            decode(&delete),
            Ok(Message::Delete {
                relation: 7,
                old: (OldKind::Full, vec![Datum::Text(b"5")])
            })
        );
        let truncate = W::default().u8(b'T').i32(2).u8(0).i32(7).i32(8).0;
        assert_eq!(
            decode(&truncate),
            Ok(Message::Truncate {
                relations: vec![7, 8]
            })
        );
    }

    #[test]
    fn messages_carry_prefix_content_and_whether_transactional() {
        let mut hb = W::default()
            .u8(b'M')
            .u8(0)
            .i64(0x1506280)
            .s("mssqlpg_heartbeat")
            .i32(3);
        hb.0.extend_from_slice(b"123");
        assert_eq!(
            decode(&hb.0),
            Ok(Message::Message {
                transactional: false,
                lsn: 0x1506280,
                prefix: "mssqlpg_heartbeat",
                content: b"123"
            })
        );
        let fence = W::default().u8(b'M').u8(1).i64(1).s("f").i32(0).0;
        assert!(matches!(
            decode(&fence),
            Ok(Message::Message {
                transactional: true,
                ..
            })
        ));
    }

    #[test]
    fn truncated_or_unknown_input_is_refused_with_where() {
        let insert = W::default().u8(b'I').i32(7).u8(b'N').i16(1).text("12345").0;
        for cut in 0..insert.len() {
            assert!(decode(&insert[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = insert.clone();
        long.push(0);
        assert_eq!(
            decode(&long),
            Err(Malformed {
                what: "trailing bytes",
                at: insert.len()
            })
        );
        assert_eq!(
            decode(b"Z"),
            Err(Malformed {
                what: "message type",
                at: 0
            })
        );
        let bad_kind = W::default().u8(b'I').i32(7).u8(b'N').i16(1).u8(b'q').0;
        assert!(matches!(
            decode(&bad_kind),
            Err(Malformed {
                what: "tuple column kind",
                ..
            })
        ));
        let negative = W::default().u8(b'I').i32(7).u8(b'N').i16(1).u8(b't').i32(-5).0;
        assert!(decode(&negative).is_err());
    }
}
