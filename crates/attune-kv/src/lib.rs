//! Attune's LSM key-value engine. (Being built; see docs/kv.md.)
