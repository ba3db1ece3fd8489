//! Binding unscheduled Pods to Nodes (there is no kube-scheduler). (Being written.)
