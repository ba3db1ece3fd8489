//! The tests of `moco-testkit`, one module per file, linked into one test binary (as every
//! crate's; `tests/tests/test_layout.rs`). One module runs with
//! `cargo test -p moco-testkit --test integration <module>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fake_apiserver;
