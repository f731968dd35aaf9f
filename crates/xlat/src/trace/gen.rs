//! gen (stub: to be implemented).
