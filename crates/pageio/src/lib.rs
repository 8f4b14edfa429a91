//! # pageio
//!
//! PostgreSQL 18's asynchronous I/O subsystem as a standalone engine for page-based storage,
//! with PostgreSQL's on-disk format and the engine side of the `pageio` tools (scans,
//! checksum verification, benchmark data sets).
//!
//! The crate is layered like the data path drawn in the repository's `docs/ARCHITECTURE.md`;
//! a request moves down once and its completion moves up once, and no layer reaches past the
//! one below it:
//!
//! ```text
//!  scan ──► ReadStream ──► BufferPool ──► Aio (handles, batches, merging) ──► IoMethod ──► storage ──► kernel
//!           verify, gen ───────────────────┘  (straight to the handles: no pool, no look-ahead)
//! ```
//!
//! No module imports one that imports it back. Each has a rank, and a module uses only
//! modules of a lower rank — siblings of one rank use none of each other; the test
//! `tests/layers.rs` holds the ranks, with the reason for each, and fails on a `crate::`
//! reference that points up or sideways:
//!
//! ```text
//!  10 advise
//!   9 measure
//!   8 scan, verify, gen, host
//!   7 catalog
//!   6 visibility
//!   5 stream        read streams, and the read-ahead advice they give the kernel
//!   4 buffer
//!   3 aio           handles, methods, the I/O pipeline and the write stream built on it
//!   2 config
//!   1 page          on-disk formats: pages, varlena (decompression too), pg_control, CRC-32C
//!   0 storage, sql  files and bytes (one memory-mapping type); SQL text
//! ```
//!
//! Top to bottom (each module's header comment is its design document):
//!
//! * [`scan`] runs sequential, bitmap-heap and index scans over PostgreSQL's relation files,
//!   walking btrees as PostgreSQL does and reading heap pages through read streams.
//! * [`catalog`] reads a stopped cluster's system catalogs offline — databases, tables,
//!   columns, TOAST tables, btree indexes and their files — through the buffer pool.
//! * [`verify`] is `pg_checksums --check` for a stopped cluster: its refusals, the cluster
//!   walk, a parallel checker that checks cached data in place, and verify's own defaults.
//! * [`gen`] writes the published benchmark data sets as PostgreSQL heap and btree files.
//! * [`stream`] turns "the next block I will need" into pinned, verified pages, keeping
//!   enough reads in flight (PostgreSQL's `read_stream.c`), and advises the kernel ahead of
//!   a sequential scan.
//! * [`buffer`] is the shared buffer pool: pins, clock sweep, bulk-read rings, I/O in
//!   progress shared between readers, and page verification where each read completes.
//! * [`aio`] is the asynchronous I/O subsystem: per-backend handle pools, wait references,
//!   batching and merging, and the three I/O methods (`sync`, `worker`, `io_uring`) in
//!   [`aio::method`]; the write stream ([`aio::write_stream`]) combines writes through its
//!   I/O pipeline.
//! * [`storage`] maps relations to 1 GB segment files, caches file descriptors, knows each
//!   file system's direct-I/O alignment, empties the page cache for cold runs, and holds the
//!   one memory-mapping type ([`storage::MappedRegion`]).
//! * [`page`] reads and writes PostgreSQL's on-disk page format and computes its checksum;
//!   every layer that looks inside a page uses it. It also holds the other formats several
//!   modules read: `pg_control` and its CRC-32C ([`page::control`]), varlena decompression,
//!   PostgreSQL's float8 order.
//! * [`config`] holds the settings under their PostgreSQL names.
//! * [`host`] reads the machine's facts (memory, cgroup limits, CPUs, THP, NUMA, scheduler,
//!   io_uring sysctls, limits, the storage behind a path) for `advise`, through a sysroot.
//! * [`advise`] turns those facts into advice for PostgreSQL 17/18/19: one rule table, each
//!   rule citing its source, with a report and ready-to-apply conf and sysctl snippets.
//! * [`measure`] measures the device under a data directory and the engine on it under
//!   each io_method, in a fixed time, and recommends `effective_io_concurrency`,
//!   `io_method`, `io_workers` and `random_page_cost` from the numbers.
//!
//! ## Example
//!
//! Write two blocks through the AIO subsystem with the `worker` method, then read them back:
//!
//! ```
//! use pageio::{Aio, IoConfig, IoMethodKind};
//! use pageio::storage::{RelFile, BLCKSZ};
//! use pageio::aio::IoBuffer;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let config = IoConfig { io_method: IoMethodKind::Worker, ..IoConfig::default() };
//! let aio = Aio::new(config).unwrap();
//! let rel = RelFile::new(dir.path().join("16384"));
//! let mut backend = aio.backend().unwrap();
//!
//! let mut data = IoBuffer::zeroed(2 * BLCKSZ);
//! data.as_mut_slice().fill(7);
//! backend.write_blocks(&rel, 0, data).unwrap();
//!
//! let buffer = backend.read_blocks(&rel, 0, IoBuffer::zeroed(2 * BLCKSZ)).unwrap();
//! assert!(buffer.as_slice().iter().all(|&b| b == 7));
//! assert_eq!(backend.counters().blocks, 4);
//! ```

#![warn(missing_docs)]

pub mod advise;
pub mod aio;
pub mod buffer;
pub mod catalog;
pub mod config;
pub mod gen;
pub mod host;
pub mod measure;
pub mod page;
pub mod scan;
pub mod sql;
pub mod storage;
pub mod stream;
pub mod verify;
pub mod visibility;

pub use aio::{Aio, Backend};
pub use config::{IoConfig, IoMethodKind};
