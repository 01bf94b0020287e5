// Package kapi is the little of the Kubernetes API the kubernetes provider
// speaks, over net/http and encoding/json: where the API server is and who
// the gateway is to it (a kubeconfig's context, or the pod's service
// account in a cluster, its token read again whenever the file changes),
// one REST call with the API's Status errors as values, watches decoded
// event by event with their resourceVersion, and the few object shapes the
// provider reads and writes. It imports no k8s.io module.
package kapi
