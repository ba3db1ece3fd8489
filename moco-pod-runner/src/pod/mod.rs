//! The Pod worker: a Pod's life from binding to deletion. (Being written.)
