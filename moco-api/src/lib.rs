//! # moco-api
