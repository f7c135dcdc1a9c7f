//! Store conformance suite (to be written).
