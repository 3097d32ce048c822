//! The mssql-pg-operator controller: reconciles `Migration`s into worker Jobs and aggregates their
//! `MigrationTask`s into the Migration status.
//!
//! Pure parts (`decide`, `aggregate`, `jobs`, `observe`) hold all the logic and are unit-tested without a
//! cluster; `controller` reads, applies and reports.

pub mod aggregate;
pub mod config;
pub mod controller;
pub mod decide;
pub mod endpoints;
pub mod error;
pub mod jobs;
pub mod leader;
pub mod metrics;
pub mod observe;
pub mod online;
pub mod selftest;
pub mod server;
pub mod telemetry;
pub mod tenancy;
