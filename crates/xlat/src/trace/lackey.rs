//! lackey (stub: to be implemented).
