//! One row of the `pg_aios` view, made from a handle in use: the columns PostgreSQL 18's
//! view has, with the same values for the same state.

use super::*;

/// One row of the `pg_aios` view: a handle in use.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AioRow {
    /// Thread id of the owning backend.
    pub pid: i32,
    /// Global handle number.
    pub io_id: u32,
    /// Generation of the handle.
    pub io_generation: u64,
    /// Handle state.
    pub state: &'static str,
    /// `readv`, `writev`, or `invalid` before definition.
    pub operation: &'static str,
    /// File offset in bytes.
    pub off: u64,
    /// Length in bytes.
    pub length: u64,
    /// `smgr` for relation I/O; `invalid` before definition, as in pg_aios.
    pub target: &'static str,
    /// Number of handle-data entries.
    pub handle_data_len: u32,
    /// Bytes or `-errno`, once known.
    pub raw_result: Option<i64>,
    /// UNKNOWN, OK, PARTIAL or ERROR.
    pub result: &'static str,
    /// E.g. `blocks 200752..200767 in file "base/16440/16456"`; empty before definition
    /// (a handle handed out but not yet defined has no target yet).
    pub target_desc: String,
    /// Executed synchronously.
    pub f_sync: bool,
    /// Memory is backend-local, not shared buffers.
    pub f_localmem: bool,
    /// Buffered (not direct) I/O.
    pub f_buffered: bool,
}

impl AioRow {
    pub(super) fn from_handle(
        backend_shared: &BackendShared,
        io_id: u32,
        generation: u64,
        state: HandleState,
        data: &HandleData,
    ) -> AioRow {
        let known = state >= HandleState::CompletedIo;
        // A handle handed out keeps the previous I/O's target until it is defined again:
        // show none rather than a stale one.
        let defined = data.op.is_some();
        AioRow {
            pid: backend_shared.tid.load(Ordering::Relaxed),
            io_id,
            io_generation: generation,
            state: state.as_str(),
            operation: data.op.map(IoOp::as_str).unwrap_or("invalid"),
            off: data.offset_bytes,
            length: data.len_bytes() as u64,
            target: if defined { "smgr" } else { "invalid" },
            handle_data_len: data.handle_data.len() as u32,
            raw_result: known.then_some(data.result.raw_result),
            result: data.result.status.as_str(),
            target_desc: if defined {
                data.target.desc()
            } else {
                String::new()
            },
            f_sync: data.f_sync,
            f_localmem: data.f_localmem,
            f_buffered: !backend_shared.direct,
        }
    }
}
