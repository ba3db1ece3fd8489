//! The local platform behind `moco local`: instances as processes, roles as TCP endpoints.
