package docker_test

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/internal/testbin"
)

// docBlocks returns the yaml blocks of docs/docker.md that follow a
// <!-- marker --> line.
func docBlocks(t *testing.T, marker string) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", "docker.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- " + regexp.QuoteMeta(marker) + " -->\n```yaml\n(.*?)```")
	var out []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestDocsConfigsCheck: every gateway config of docs/docker.md passes
// `wakegate check-config`, and its compose file is YAML.
func TestDocsConfigsCheck(t *testing.T) {
	cfgs := docBlocks(t, "docker-config")
	if len(cfgs) < 2 {
		t.Fatalf("docs/docker.md has %d gateway configs, want the host one and the compose one", len(cfgs))
	}
	for i, c := range cfgs {
		dir := t.TempDir()
		c = strings.ReplaceAll(c, "data_dir: /data", "data_dir: "+filepath.Join(dir, "data"))
		path := filepath.Join(dir, "wakegate.yaml")
		if err := os.WriteFile(path, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
		p := testbin.Start(t, dir, nil, "check-config", "--config", path)
		if err, _ := p.Wait(60e9); err != nil {
			t.Errorf("config %d of docs/docker.md: %v\n%s\n%s", i, err, c, p.Output())
		}
	}
	compose := docBlocks(t, "docker-compose")
	if len(compose) != 1 {
		t.Fatalf("docs/docker.md has %d compose files, want 1", len(compose))
	}
	var v struct {
		Services map[string]struct {
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(compose[0]), &v); err != nil || len(v.Services["wakegate"].Volumes) == 0 {
		t.Fatalf("the compose file: %v %+v", err, v)
	}
}
