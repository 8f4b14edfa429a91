//! `pageio aios --dsn …`: the live view for a running PostgreSQL 18 server.
//!
//! Not built yet: the command says so instead of guessing.

use super::AiosArgs;

/// Runs `pageio aios --dsn …`.
pub fn run(args: &AiosArgs) -> Result<i32, Box<dyn std::error::Error>> {
    let _ = args;
    Err("pageio aios --dsn is not available in this build; run pageio aios without --dsn for pageio processes".into())
}
