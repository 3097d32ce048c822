//! How rows travel and resume: chunk limits, the resume state committed with each chunk, the
//! binary COPY encoding both directions produce, and the row hashes both sides of a checksum
//! compute (and the key-order merge of an upsert's verification).

pub mod binary;
pub mod checkpoint;
pub mod chunk;
pub mod row_hash;
pub mod upsert_match;
