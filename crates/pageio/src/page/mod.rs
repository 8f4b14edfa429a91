//! PostgreSQL's on-disk page format (placeholder; filled in by the page-format work).
