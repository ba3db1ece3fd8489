//! The Nodes: registered, their status and Lease renewed as a kubelet's are. (Being written.)
