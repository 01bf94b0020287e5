// Package kubetest runs a real Kubernetes control plane for tests, with one
// node played by an agent of its own, so that the kubernetes provider is
// tested against the real API server, controllers and scheduler rather
// than a fake client.
//
// Start (once per test binary) runs etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, each a process of the one
// program scripts/kube/build.sh builds from their Go modules (cluster.go), on loopback ports with a CA and a
// serving certificate made at start (pki.go), a static token file (the
// admin, in system:masters, and the users of Users, with no rights until a
// test binds a Role), RBAC, and a service-account key pair. Every process
// is started with Pdeathsig from one locked thread (proc.go), so none
// outlives the test binary. It uses net/http and encoding/json only: no
// k8s.io module is part of the wakegate module (client.go, types.go).
//
// The node agent (node.go, pod.go) registers the node wakegate-test-node
// (Ready, with allocatable cpu, memory and pods, renewing its Lease),
// watches the pods bound to it (a list, then a watch from its
// resourceVersion, listing again on 410 Gone) and plays the kubelet for
// each:
//
//   - the pod gets an address of its own (podnet.go): 198.18.0.10 and up
//     when the agent can make that range local with a route on lo (as
//     root), else 127.0.0.10 and up (the API server refuses loopback
//     addresses in EndpointSlices, so then no Service lists the pod);
//   - each container runs as a local process of the image the test
//     registered with Node.Image, its command and args with $(VAR)
//     expanded as Kubernetes does (expand.go), its env plus POD_IP,
//     POD_NAME, POD_NAMESPACE and IMAGE, its output in a file (Node.Log);
//     an image never registered waits with ErrImagePull, then
//     ImagePullBackOff;
//   - the pod's status (phase, podIP, hostIP, startTime, the conditions
//     PodScheduled, Initialized, ContainersReady and Ready, container
//     states with restart counts, exit codes and last states) is written
//     to the status subresource whenever it changes;
//   - Ready follows the readinessProbe (httpGet or tcpSocket against the
//     pod's address). The agent probes every 100 ms until the first pass,
//     so a test sees readiness at once, then at the probe's period; with
//     no probe a running container is ready;
//   - an exited container restarts as restartPolicy says, after a back-off
//     of 100 ms doubling up to 5 s (CrashLoopBackOff meanwhile);
//   - a deleted pod's processes get SIGTERM, SIGKILL after the grace
//     period, then the agent deletes the pod with grace period 0 on its UID,
//     the kubelet's last step.
//
// What the agent leaves out of a kubelet: images (an image is a command
// line registered by the test), cgroups and resource limits, namespaces
// and users (a container runs as the test binary's user, in its pod's
// folder), volumes (none is mounted, emptyDir included), init and sidecar
// containers, env from ConfigMaps and Secrets, exec, logs, attach and
// port-forward through the API, liveness and startup probes, exec probes,
// hostPort and Service traffic (no kube-proxy: a Service's address is
// never reachable, its EndpointSlices are), DNS, eviction, and more than
// one node.
//
// DESIGN rules that live here: none; it is the ground the kubernetes
// provider's tests of rules 1, 15, 29 and 33 stand on.
package kubetest
