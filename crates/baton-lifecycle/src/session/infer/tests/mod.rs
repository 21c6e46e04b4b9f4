//! Tests of the build phase's inference on real temporary project directories.

mod fixture;
mod fuzz;
mod hostile;
mod modes;
mod phases;
mod positions;
