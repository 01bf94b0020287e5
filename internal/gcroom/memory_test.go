package gcroom

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadMemory reads the memory limits of system trees laid out as
// cgroup v2, v1 and a container's namespace show them.
func TestReadMemory(t *testing.T) {
	const meminfo = "MemTotal:        1048576 kB\nMemFree:          524288 kB\n"
	cases := []struct {
		name  string
		files map[string]string
		want  Memory
		room  uint64
	}{
		{"v2 limit", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "0::/app.slice/gw.service\n",
			"sys/fs/cgroup/app.slice/gw.service/memory.max": "268435456\n",
		}, Memory{256 << 20, "cgroup"}, 16 << 20},
		{"v2 without a limit", map[string]string{
			"proc/meminfo":             meminfo,
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}, Memory{1 << 30, "machine"}, 32 << 20},
		{"v1 limit", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "134217728\n",
		}, Memory{128 << 20, "cgroup"}, 8 << 20},
		{"v1 unlimited", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, Memory{1 << 30, "machine"}, 32 << 20},
		{"a namespace's path read at the mount's top", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "4:memory:/process_api/123\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912\n",
		}, Memory{512 << 20, "cgroup"}, 32 << 20},
		{"a limit above the machine's memory", map[string]string{
			"proc/meminfo":             meminfo,
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "4294967296\n",
		}, Memory{1 << 30, "machine"}, 32 << 20},
		{"nothing readable", map[string]string{}, Memory{}, MaxHeadroom},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, body := range tc.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got := ReadMemory(root)
			if got != tc.want {
				t.Fatalf("ReadMemory = %+v, want %+v", got, tc.want)
			}
			if room := DefaultHeadroom(got); room != tc.room {
				t.Fatalf("DefaultHeadroom = %d, want %d", room, tc.room)
			}
		})
	}
}

// TestReadMemoryHere: this machine's own tree gives some memory, and a
// headroom within bounds.
func TestReadMemoryHere(t *testing.T) {
	m := ReadMemory("/")
	if m.Bytes == 0 || m.Source == "" {
		t.Fatalf("ReadMemory(/) = %+v: found no memory", m)
	}
	if room := DefaultHeadroom(m); room == 0 || room > MaxHeadroom {
		t.Fatalf("DefaultHeadroom = %d for %+v", room, m)
	}
}
