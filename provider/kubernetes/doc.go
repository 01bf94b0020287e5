// Package kubernetes is the kubernetes provider: a home is a workload of a
// cluster. A Deployment or a StatefulSet is scaled between 0 and 1 through
// its scale subresource; a Pod home's pod is made from a template at wake
// and deleted at suspend (the per-user sandbox). The gateway forwards to
// the pod's IP and port (a gateway in the cluster) or to a Service, as
// each home says.
//
// One file per job: config.go (the section, a home's options and their
// checks), factory.go (the registry entry), provider.go (the verbs),
// workload.go (reads, the fenced scale and image writes, what a pod's
// status says is wrong), pods.go (Pod homes), watch.go (the one pod watch
// per namespace every home reads), health.go (the readiness rung),
// discover.go (annotated Deployments as homes), errors.go (API errors as
// operator hints). Package kapi below speaks the API over net/http.
//
// DESIGN rules that live here: 15's cluster half (each replicas or image
// write carries the resourceVersion it read and sets the annotation
// wakegate.io/generation one above the one it read, with
// wakegate.io/owner: a stale writer gets 409 Conflict, reads again, and
// finds its work done or tries once more; the fleet's lease in the store
// still decides who acts), 11's health rung (Health: the pod's Ready
// condition, image pulls, crash loops, OOM kills), 29 for a cluster (a
// stop is proven only once no pod of the home is left: waitGone), 23 (an
// API error becomes a *provider.Error whose hint names the resource and
// the verb to grant, for operators only), and 1's provider half (a wake
// that finds the replicas at 1 already, another gateway's write, writes
// nothing).
package kubernetes
