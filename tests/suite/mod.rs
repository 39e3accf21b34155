//! Integration test modules (one binary: tests/all.rs).

mod mock_selftest;
