// etcd for moco-rs's tests: the upstream server from go.etcd.io/etcd/server/v3, linked in the
// wrapper module that scripts/kube/build.sh generates.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
