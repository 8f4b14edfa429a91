//! What a measurement of PGDATA's storage found, as the rules use it.
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
//! measured worker count. For the first, the choice is also made once without the io_uring
//! runs ([`MeasuredIo::without_io_uring`], the same `recommend` on the other runs), so that a
//! machine where the engine may use io_uring but PostgreSQL may not still gets the measured
//! best of `worker` and `sync`, with its worker count.
//!
//! [`measure::run`]: crate::measure::run
//! [`measure::recommend`]: crate::measure::recommend

use serde::Serialize;

use crate::config::IoMethodKind;
use crate::measure::{self, Measurement, MethodSkipped, Recommendations};

/// The measured I/O behaviour of PGDATA's storage and the settings chosen from it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredIo {
    /// The directory measured.
    pub target: String,
    /// How long the measurement took, in seconds.
    pub elapsed_seconds: f64,
    /// The CPUs the worker count was capped for.
    pub effective_cpus: usize,
    /// Random 8 kB reads per second at queue depth 1: what tells a spinning disk (a few
    /// hundred at most) from anything else, whatever its rotational flag says.
    pub random_reads_per_second_qd1: f64,
    /// The settings [`measure::recommend`] chose, each with the numbers behind it.
    pub recommendations: Recommendations,
    /// What [`measure::recommend`] chooses when the io_uring runs are left out: the
    /// recommendation where PostgreSQL cannot use io_uring. `None` when io_uring was not
    /// measured (then `recommendations` already leaves it out).
    pub without_io_uring: Option<Recommendations>,
}

impl MeasuredIo {
    /// Carries `m` and what [`measure::recommend`] chooses from it (for the CPUs the
    /// measurement ran with, a container's limit when there is one).
    pub fn from_measurement(m: &Measurement) -> MeasuredIo {
        let uring_measured = m
            .relation
            .runs
            .iter()
            .any(|r| r.io_method == IoMethodKind::IoUring);
        let without_io_uring = uring_measured.then(|| {
            let mut other = m.clone();
            other
                .relation
                .runs
                .retain(|r| r.io_method != IoMethodKind::IoUring);
            other.relation.not_measured.push(MethodSkipped {
                io_method: IoMethodKind::IoUring,
                reason: "left out, PostgreSQL cannot use it here".into(),
            });
            measure::recommend(&other, m.effective_cpus)
        });
        MeasuredIo {
            target: m.target.clone(),
            elapsed_seconds: m.elapsed_seconds,
            effective_cpus: m.effective_cpus,
            random_reads_per_second_qd1: m.device.random_reads_per_second_qd1,
            recommendations: measure::recommend(m, m.effective_cpus),
            without_io_uring,
        }
    }

    /// The settings to use when PostgreSQL can (`true`) or cannot use io_uring here.
    pub fn for_postgresql(&self, io_uring_usable: bool) -> &Recommendations {
        match &self.without_io_uring {
            Some(other)
                if !io_uring_usable
                    && self.recommendations.io_method.value == IoMethodKind::IoUring =>
            {
                other
            }
            _ => &self.recommendations,
        }
    }

    /// The recommended `io_method`, when PostgreSQL can use io_uring here or not.
    pub fn io_method(&self, io_uring_usable: bool) -> IoMethodKind {
        self.for_postgresql(io_uring_usable).io_method.value
    }

    /// The recommended worker count when the recommended method is `worker`.
    pub fn io_workers(&self, io_uring_usable: bool) -> Option<usize> {
        let r = self.for_postgresql(io_uring_usable);
        (r.io_method.value == IoMethodKind::Worker).then_some(r.io_workers.value)
    }
}
