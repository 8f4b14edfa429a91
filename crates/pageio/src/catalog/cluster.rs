//! Opening a cluster's catalog in one call.
//!
//! Every reader of a stopped cluster by name — listing its tables, scanning one, running a
//! benchmark on one — does the same steps before it can ask the catalog anything:
//!
//! ```text
//!  global/pg_control ─► PostgreSQL 18's? CRC right? cleanly shut down? checksums on?
//!       │                  (a running or crashed cluster is refused: CatalogError::NotShutDown)
//!       ▼
//!  a buffer pool that checks pages as the cluster's catalogs must be checked
//!       ▼
//!  pg_database, pg_tablespace ─► Catalog (then .database(name) or .resolve(spec, db))
//! ```
//!
//! [`Catalog::open_cluster`] does them, with a pool the catalog owns, so a caller holds
//! one value and cannot pair the catalog with a pool of the wrong checks.

use std::ops::Deref;
use std::path::Path;

use super::{cluster_check_options, Catalog, CatalogError};
use crate::aio::Aio;
use crate::buffer::BufferPool;

/// The buffer pool a [`Catalog`] reads through: lent by the caller, or its own.
pub(super) enum CatalogPool<'p> {
    /// A pool the caller made (and checked against the cluster, see [`Catalog::open`]).
    Lent(&'p BufferPool),
    /// A pool made for this catalog by [`Catalog::open_cluster`].
    Owned(Box<BufferPool>),
}

impl Deref for CatalogPool<'_> {
    type Target = BufferPool;

    fn deref(&self) -> &BufferPool {
        match self {
            CatalogPool::Lent(pool) => pool,
            CatalogPool::Owned(pool) => pool,
        }
    }
}

impl Catalog<'static> {
    /// Opens the catalog of the cleanly shut-down PostgreSQL 18 cluster at `pgdata`:
    /// checks `pg_control` (version, CRC, state: a running or crashed cluster is
    /// [`CatalogError::NotShutDown`]), makes a buffer pool on `aio` that verifies pages
    /// as the cluster's own checks say ([`cluster_check_options`]: checksums when it has
    /// them, never past a damaged page), and reads `pg_database` and `pg_tablespace`
    /// through it. The pool is sized by `aio`'s `shared_buffers`; the catalogs of a small
    /// cluster take a few MB of it. [`Catalog::check_options`] gives the checks back, for
    /// reading the cluster's tables the same way.
    pub fn open_cluster(pgdata: &Path, aio: &Aio) -> Result<Catalog<'static>, CatalogError> {
        let checks = cluster_check_options(pgdata)?;
        let pool = BufferPool::new(aio, checks).map_err(CatalogError::Pool)?;
        Catalog::open_through(pgdata, CatalogPool::Owned(Box::new(pool)))
    }
}
