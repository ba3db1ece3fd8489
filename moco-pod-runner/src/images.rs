//! Images mapped to local programs. (Being written.)
