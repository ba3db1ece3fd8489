//! A container's environment and its `$(VAR)` expansion. (Being written.)
