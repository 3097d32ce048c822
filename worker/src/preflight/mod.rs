//! What is checked in the target before anything is written: what a run would do to each existing
//! table, whether the names the plan gives keys, indexes, constraints and views are free or ours,
//! and whether PostgreSQL's crash recovery emptied an UNLOGGED table.

pub mod target_names;
pub mod target_tables;
pub mod unlogged_loss;
