package kapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/kubetest"
	"github.com/wakegate/wakegate/provider/kubernetes/kapi"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// kubeconfig writes a kubeconfig for c whose user reads its token from
// tokenFile, and returns its path.
func kubeconfig(t *testing.T, c *kubetest.Cluster, tokenFile string) string {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: k
  cluster: {server: %q, certificate-authority: %q}
users:
- name: u
  user: {tokenFile: %q}
contexts:
- name: k
  context: {cluster: k, user: u}
current-context: k
`, c.Server, c.CAFile, tokenFile)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// client returns a client of c whose kubeconfig reads its token from a
// file holding token, and that file's path.
func client(t *testing.T, c *kubetest.Cluster, token string) (*kapi.Client, string) {
	t.Helper()
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := kapi.LoadKubeconfig(kubeconfig(t, c, tf), "")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl, tf
}

// TestTokenFileReadAgain: a token file is read again when it changes: a
// call as "nobody" is forbidden, the same client after the file holds the
// admin's token is not.
func TestTokenFileReadAgain(t *testing.T) {
	c := kubetest.Start(t)
	ns := c.Namespace(t)
	cl, tf := client(t, c, c.Token("nobody"))
	ctx := context.Background()
	err := cl.Do(ctx, "GET", "/api/v1/namespaces/"+ns+"/pods", "", nil, nil)
	if !kapi.IsForbidden(err) {
		t.Fatalf("as nobody: %v, want 403", err)
	}
	// A new modification time even on a coarse clock.
	if err := os.WriteFile(tf, []byte(c.AdminToken), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(tf, later, later); err != nil {
		t.Fatal(err)
	}
	if err := cl.Do(ctx, "GET", "/api/v1/namespaces/"+ns+"/pods", "", nil, nil); err != nil {
		t.Fatalf("after the token file changed: %v", err)
	}
}

// TestReflectFollowsChanges: Reflect lists a collection, then sees an
// object made after the list and its deletion, from the watch.
func TestReflectFollowsChanges(t *testing.T) {
	c := kubetest.Start(t)
	ns := c.Namespace(t)
	cl, _ := client(t, c, c.AdminToken)
	ctx, cancel := context.WithCancel(context.Background())
	listed := make(chan int, 4)
	events := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl.Reflect(ctx, "/api/v1/namespaces/"+ns+"/configmaps", func(items []json.RawMessage) error {
			listed <- len(items)
			return nil
		}, func(ev kapi.Event) error {
			var m struct{ Metadata kapi.Meta }
			_ = json.Unmarshal(ev.Object, &m)
			events <- ev.Type + " " + m.Metadata.Name
			return nil
		}, func(err error) { t.Logf("reflect: %v", err) })
	}()
	defer func() { cancel(); <-done }()
	<-listed
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "seen"}}
	if err := c.Do(ctx, "POST", "/api/v1/namespaces/"+ns+"/configmaps", cm, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "DELETE", "/api/v1/namespaces/"+ns+"/configmaps/seen", nil, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		select {
		case e := <-events:
			if e == "ADDED seen" || e == "DELETED seen" {
				got = append(got, e)
			}
		case <-time.After(time.Minute):
			t.Fatalf("events seen: %v", got)
		}
	}
	if got[0] != "ADDED seen" || got[1] != "DELETED seen" {
		t.Fatalf("events %v, want ADDED then DELETED", got)
	}
}

// TestKubeconfigRefusesPlugins: a user that authenticates through an
// exec plugin is refused with the way out.
func TestKubeconfigRefusesPlugins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `clusters: [{name: k, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {exec: {command: aws}}}]
contexts: [{name: k, context: {cluster: k, user: u}}]
current-context: k
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := kapi.LoadKubeconfig(path, "")
	if err == nil || !contains(err.Error(), "authenticates through a plugin") {
		t.Fatalf("error %v", err)
	}
	if _, err := kapi.LoadKubeconfig(path, "other"); err == nil || !contains(err.Error(), `has no context "other"`) {
		t.Fatalf("error %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
