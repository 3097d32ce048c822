//! The statement entry point: a batch is parsed, then each statement dispatched to what runs
//! it, with the batch-level rules (which errors abort the batch, XACT_ABORT, RETURN).

mod batch;
mod messages;
mod procedures;
mod session_options;
mod variables;

pub(crate) use batch::run_batch;
