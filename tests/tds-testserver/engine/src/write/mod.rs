//! What every write of rows shares, DML and bulk loads alike: the values it stores and the
//! errors for the constraints it breaks.

pub(crate) mod column_values;
pub(crate) mod conflicts;
pub(crate) mod constraints;
pub(crate) mod counters;
