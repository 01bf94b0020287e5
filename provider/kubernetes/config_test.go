package kubernetes_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/provider/all"
)

// TestConfigErrorsNameTheField: a home's bad options and a bad section
// are refused at load, naming the file, the line and the field.
func TestConfigErrorsNameTheField(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters:
- {name: c, cluster: {server: "https://127.0.0.1:6443"}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: x, context: {cluster: c, user: u, namespace: team}}
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ section, options, want string }{
		{"", "{kind: Job, name: web}", "homes[0].options.kind: want Deployment, StatefulSet or Pod"},
		{"", "{port: 8080}", "homes[0].options.name: a Deployment or StatefulSet home names its workload"},
		{"", "{name: Web_1}", "homes[0].options.name: not a Kubernetes object name"},
		{"", "{name: web, forward: node}", "homes[0].options.forward: want pod or service"},
		{"", "{name: web, forward: service, address: \"web:80\"}", "homes[0].options.address: want a base URL"},
		{"", "{name: web, service: web}", "homes[0].options.forward: service, service_port and address go with forward: service"},
		{"", "{kind: Pod}", "homes[0].options.pod: a Pod home needs its pod spec"},
		{"", "{kind: Pod, pod: {containers: []}}", "homes[0].options.pod: the pod spec has no containers"},
		{"", "{name: web, replicas: 2}", `homes[0].options: json: unknown field "replicas"`},
		{"    namespace: Team\n", "{name: web}", "providers.kubernetes.namespace: not a namespace name"},
		{"    kubeconfg: x\n", "{name: web}", "providers.kubernetes.kubeconfg: unknown field"},
	} {
		cfg := "listen: 127.0.0.1:0\nproviders:\n  kubernetes:\n    kubeconfig: " + kc + "\n" + c.section +
			"homes:\n  - id: web\n    provider: kubernetes\n    options: " + c.options + "\n"
		_, err := all.Load("wakegate.yaml", []byte(cfg))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "wakegate.yaml:") {
			t.Errorf("options %s, section %q: error %v, want %q with the file and line", c.options, c.section, err, c.want)
		}
	}
	good := "listen: 127.0.0.1:0\nproviders:\n  kubernetes:\n    kubeconfig: " + kc + "\nhomes:\n" +
		"  - {id: a, provider: kubernetes, options: {name: web, forward: service, service_port: 80}}\n" +
		"  - {id: b, provider: kubernetes, options: {kind: Pod, pod: \"containers: [{name: w, image: '{image}'}]\"}}\n" +
		"  - {id: c, provider: kubernetes, options: {kind: StatefulSet, name: db, namespace: data, container: db, port: 5432}}\n"
	if _, err := all.Load("wakegate.yaml", []byte(good)); err != nil {
		t.Fatal(err)
	}
}
