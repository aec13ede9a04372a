// Command etcd is upstream's etcd server (go.etcd.io/etcd/server/v3 at the version
// pinned in go.mod: the one k8s.io/kubernetes itself requires), built for
// fidelnet's test control plane: the same entry point as the server module's
// main.go.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
