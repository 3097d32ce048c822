//! Bulk loads: the INSERT BULK target, the load of the BULK_LOAD message's rows, and BULK
//! INSERT from a file (which loads through the same path).

pub(crate) mod file;
pub(crate) mod load;
pub(crate) mod target;
