//! placeholder: see lib.rs
