//! The Pod runner: test infrastructure that stands in for the kubelet and the container
//! runtime of a real control plane (kube-apiserver, kube-controller-manager and etcd started by
//! `scripts/kube.sh`). Each Pod gets its own network namespace on a bridge the runner makes;
//! each container is a local program (the image table in [`images`]) started in its own mount
//! and UTS namespaces over a copy-on-write view of the host's filesystem. Not shipped: the
//! operator image never contains it.
//!
//! The parts, from the machine up: [`cidr`] (address ranges), [`net`] (bridge, Pod namespaces,
//! the Service blackhole), [`container`] (starting, signalling, freezing and entering
//! containers), [`volumes`] and [`env`] (what a container sees), [`node`], [`schedule`] and
//! [`provision`] (what the API server sees of the machine), and the Pod worker that ties them.

pub mod cidr;
pub mod container;
pub mod context;
pub mod env;
pub mod images;
pub mod net;
pub mod node;
pub mod pod;
pub mod provision;
pub mod runner;
pub mod schedule;
pub mod state;
pub mod store;
pub mod volumes;
