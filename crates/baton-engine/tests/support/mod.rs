pub mod completed_demo;
pub mod long_node;
