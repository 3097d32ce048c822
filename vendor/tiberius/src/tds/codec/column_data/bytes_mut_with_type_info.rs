use crate::TypeInfo;
use bytes::buf::UninitSlice;
use bytes::{BufMut, BytesMut};
use std::borrow::{Borrow, BorrowMut};
use std::ops::{Deref, DerefMut};

pub(crate) struct BytesMutWithTypeInfo<'a> {
    bytes: &'a mut BytesMut,
    type_info: Option<&'a TypeInfo>,
}

impl<'a> BytesMutWithTypeInfo<'a> {
    pub fn new(bytes: &'a mut BytesMut) -> Self {
        BytesMutWithTypeInfo {
            bytes,
            type_info: None,
        }
    }

    pub fn with_type_info(mut self, type_info: &'a TypeInfo) -> Self {
        self.type_info = Some(type_info);
        self
    }

    pub fn type_info(&self) -> Option<&'a TypeInfo> {
        self.type_info
    }

    // mssql-pg-operator patch: 04-bulk-encode-speedups
    /// Appends `s` as UTF-16LE straight into the buffer (no intermediate `Vec`); `len` is its
    /// length as UTF-16LE, which is twice `s.len()` exactly when `s` is ASCII. ASCII text, the
    /// common case, is widened eight bytes at a time.
    pub(crate) fn put_utf16_le(&mut self, s: &str, len: usize) {
        let bytes = s.as_bytes();
        debug_assert_eq!(len == 2 * bytes.len(), bytes.is_ascii());
        if len == 2 * bytes.len() {
            let start = self.bytes.len();
            self.bytes.resize(start + 2 * bytes.len(), 0);
            let out = &mut self.bytes[start..];
            let mut src = bytes.chunks_exact(8);
            let mut dst = out.chunks_exact_mut(16);
            for (i, o) in (&mut src).zip(&mut dst) {
                // b0 b1 .. b7 -> b0 0 b1 0 .. b7 0
                let mut x = u128::from(u64::from_le_bytes([
                    i[0], i[1], i[2], i[3], i[4], i[5], i[6], i[7],
                ]));
                x = (x | (x << 32)) & 0x0000_0000_ffff_ffff_0000_0000_ffff_ffff;
                x = (x | (x << 16)) & 0x0000_ffff_0000_ffff_0000_ffff_0000_ffff;
                x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff_00ff_00ff_00ff_00ff;
                o.copy_from_slice(&x.to_le_bytes());
            }
            for (b, o) in src
                .remainder()
                .iter()
                .zip(dst.into_remainder().chunks_exact_mut(2))
            {
                o[0] = *b;
            }
        } else {
            self.bytes.reserve(len);
            for unit in s.encode_utf16() {
                self.bytes.extend_from_slice(&unit.to_le_bytes());
            }
        }
    }
}

unsafe impl<'a> BufMut for BytesMutWithTypeInfo<'a> {
    fn remaining_mut(&self) -> usize {
        self.bytes.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        self.bytes.advance_mut(cnt)
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.bytes.chunk_mut()
    }

    // mssql-pg-operator patch: 04-bulk-encode-speedups
    // Every `put_u8`/`put_i32_le`/... of a bulk-load row goes through `put_slice`; `BufMut`'s
    // default loops over `chunk_mut` (which reserves 64 bytes at a time), `BytesMut`'s own is
    // one reserve + memcpy. Same bytes either way.
    #[inline]
    fn put_slice(&mut self, src: &[u8]) {
        self.bytes.extend_from_slice(src)
    }
}

impl<'a> Borrow<[u8]> for BytesMutWithTypeInfo<'a> {
    fn borrow(&self) -> &[u8] {
        self.bytes.deref()
    }
}

impl<'a> BorrowMut<[u8]> for BytesMutWithTypeInfo<'a> {
    fn borrow_mut(&mut self) -> &mut [u8] {
        self.bytes.borrow_mut()
    }
}

impl<'a> Deref for BytesMutWithTypeInfo<'a> {
    type Target = BytesMut;

    fn deref(&self) -> &Self::Target {
        self.bytes
    }
}

impl<'a> DerefMut for BytesMutWithTypeInfo<'a> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.bytes
    }
}
