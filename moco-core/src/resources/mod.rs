//! Kubernetes resource decisions as pure functions (PDB, my.cnf, StatefulSet updates, volumes, reconciler versions).
