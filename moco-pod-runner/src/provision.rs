//! The default StorageClass's provisioner and resizer. (Being written.)
