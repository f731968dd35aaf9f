//! xtr (stub: to be implemented).
