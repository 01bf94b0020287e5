// Command etcd is the etcd server of internal/kubetest's control plane,
// built from the released etcd server module by scripts/kube/build.sh.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
