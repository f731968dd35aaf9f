//! champsim (stub: to be implemented).
