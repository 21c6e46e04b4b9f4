pub mod long_node;
