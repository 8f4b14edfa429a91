//! What `pageio advise --measure` measured on PGDATA's storage, as the rules use it.
//!
//! The measurement and the choice of settings live in [`crate::measure`]: [`measure::run`]
//! reads the disk and the engine for a bounded time, and [`measure::recommend`] turns the
//! numbers into `effective_io_concurrency`, `maintenance_io_concurrency`, `io_method`,
//! `io_workers` and `random_page_cost`, each with a reason that quotes the numbers. That is
//! the one formula per setting: this module only carries its results to the rule table
//! ([`MeasuredIo::from_measurement`]), and the rules show them as `measured: <reason>`
//! instead of the guesses made from the device type. What the rules add is only what the
//! measurement cannot know: whether PostgreSQL itself may use io_uring here (its build,
//! RLIMIT_MEMLOCK, the configuration), and how PostgreSQL 19's on-demand worker pool maps the
//! measured worker count.
//!
//! [`measure::run`]: crate::measure::run
//! [`measure::recommend`]: crate::measure::recommend

use serde::Serialize;

use crate::config::IoMethodKind;
use crate::measure::{self, Measurement, Recommendations};

/// The measured I/O behaviour of PGDATA's storage and the settings chosen from it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredIo {
    /// The directory measured.
    pub target: String,
    /// How long the measurement took, in seconds.
    pub elapsed_seconds: f64,
    /// The CPUs the worker count was capped for.
    pub effective_cpus: usize,
    /// The settings [`measure::recommend`] chose, each with the numbers behind it.
    pub recommendations: Recommendations,
}

impl MeasuredIo {
    /// Carries `m` and what [`measure::recommend`] chooses from it (for the CPUs the
    /// measurement ran with, a container's limit when there is one).
    pub fn from_measurement(m: &Measurement) -> MeasuredIo {
        MeasuredIo {
            target: m.target.clone(),
            elapsed_seconds: m.elapsed_seconds,
            effective_cpus: m.effective_cpus,
            recommendations: measure::recommend(m, m.effective_cpus),
        }
    }

    /// The recommended `io_method`.
    pub fn io_method(&self) -> IoMethodKind {
        self.recommendations.io_method.value
    }

    /// The recommended worker count when the recommended method is `worker`.
    pub fn io_workers(&self) -> Option<usize> {
        (self.io_method() == IoMethodKind::Worker).then_some(self.recommendations.io_workers.value)
    }
}
