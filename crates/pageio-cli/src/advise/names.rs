//! How `pageio advise` spells the inputs the library's messages point at: its own flags.

use pageio::advise::{InputNames, UserInput};

/// `pageio advise`'s flags, for [`InputNames`].
pub struct Flags;

impl InputNames for Flags {
    fn name(&self, input: UserInput) -> String {
        match input {
            UserInput::PgData => "--pgdata",
            UserInput::PgBin => "--pg-bin",
            UserInput::PgVersion => "--pg-version",
            UserInput::MaxConnections => "--max-connections",
            UserInput::Workload => "--workload",
            UserInput::Measure => "--measure",
            UserInput::Sysroot => "--sysroot",
            UserInput::DirectIo => "--direct-io",
        }
        .to_string()
    }

    fn usage(&self, input: UserInput) -> String {
        match input {
            UserInput::PgData | UserInput::PgBin | UserInput::Sysroot => {
                format!("{} DIR", self.name(input))
            }
            _ => self.name(input),
        }
    }

    fn rerun(&self, input: UserInput) -> String {
        format!("pageio advise {}", self.usage(input))
    }
}
