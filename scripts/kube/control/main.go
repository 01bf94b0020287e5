// Command kube is internal/kubetest's control plane in one binary: its
// first argument names the component (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) and the rest are that
// component's own flags. One binary links once and compiles the packages
// the components share once.
package main

import (
	"fmt"
	"os"

	_ "time/tzdata" // CronJob time zones, as the released commands embed them

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllers "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kube etcd|kube-apiserver|kube-controller-manager|kube-scheduler [flags]")
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	var cmd *cobra.Command
	switch name {
	case "etcd":
		etcdmain.Main(append([]string{name}, args...))
		return
	case "kube-apiserver":
		cmd = apiserver.NewAPIServerCommand()
	case "kube-controller-manager":
		cmd = controllers.NewControllerManagerCommand()
	case "kube-scheduler":
		cmd = scheduler.NewSchedulerCommand()
	default:
		fmt.Fprintf(os.Stderr, "kube: unknown component %q\n", name)
		os.Exit(2)
	}
	cmd.SetArgs(args)
	os.Exit(cli.Run(cmd))
}
