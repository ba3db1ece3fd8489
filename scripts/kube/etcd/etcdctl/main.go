// etcdctl for moco-rs's tests: the upstream client from go.etcd.io/etcd/etcdctl/v3, linked in
// the wrapper module that scripts/kube/build.sh generates.
package main

import "go.etcd.io/etcd/etcdctl/v3/ctlv3"

func main() {
	ctlv3.MustStart()
}
