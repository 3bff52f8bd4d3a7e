//! External sort (placeholder).
