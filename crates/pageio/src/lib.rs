//! # pageio
//!
//! PostgreSQL 18's asynchronous I/O subsystem as a standalone engine for page-based storage.
//!
//! The crate is layered exactly like the data path in `DESIGN.md`; a request moves down once
//! and its completion moves up once:
//!
//! ```text
//!  caller ──► ReadStream ──► BufferPool ──► Aio (handles, batches, merging) ──► IoMethod ──► Storage ──► kernel
//! ```
//!
//! * [`page`] reads and writes PostgreSQL's on-disk page format and computes its checksum.
//! * [`storage`] maps relations to 1 GB segment files, caches file descriptors and knows the
//!   direct-I/O alignment of each file system.
//! * [`aio`] is the asynchronous I/O subsystem: per-backend handle pools, wait references,
//!   batching and merging, and the three I/O methods (`sync`, `worker`, `io_uring`).
//! * [`config`] holds the settings under their PostgreSQL names.
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

pub mod aio;
pub mod buffer;
pub mod config;
pub mod gen;
pub mod page;
pub mod scan;
pub mod storage;
pub mod stream;
pub mod verify;

pub use aio::{Aio, Backend};
pub use config::{IoConfig, IoMethodKind};
