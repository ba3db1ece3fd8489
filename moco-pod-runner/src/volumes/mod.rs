//! A Pod's volumes as directories of the runner's state directory, bind-mounted into its
//! containers. (Being written.)
