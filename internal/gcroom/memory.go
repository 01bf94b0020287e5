package gcroom

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MaxHeadroom is the default headroom on a machine with memory to spare.
const MaxHeadroom = 32 << 20

// Memory is what the gateway may use: the smaller of its cgroup's memory
// limit and the machine's memory. Bytes is 0 when neither could be read.
type Memory struct {
	Bytes uint64
	// Source names where Bytes came from: "cgroup" or "machine".
	Source string
}

// DefaultHeadroom is the headroom for a process that may use mem: a
// sixteenth of it, at most MaxHeadroom, so that a small VM or container
// does not spend a large share of its memory on collecting less often.
func DefaultHeadroom(mem Memory) uint64 {
	if mem.Bytes == 0 {
		return MaxHeadroom
	}
	return min(MaxHeadroom, mem.Bytes/16)
}

// ReadMemory reads the memory available to this process under root ("/"
// on a real system): the memory limit of its cgroup (v2, else v1's
// memory controller) when there is one, and MemTotal from /proc/meminfo.
func ReadMemory(root string) Memory {
	var m Memory
	if total := memTotal(filepath.Join(root, "proc/meminfo")); total > 0 {
		m = Memory{Bytes: total, Source: "machine"}
	}
	if limit := cgroupLimit(root); limit > 0 && (m.Bytes == 0 || limit < m.Bytes) {
		m = Memory{Bytes: limit, Source: "cgroup"}
	}
	return m
}

// memTotal is MemTotal of a /proc/meminfo, in bytes; 0 if unreadable.
func memTotal(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// cgroupLimit is the memory limit of this process's cgroup under root,
// in bytes; 0 for none ("max", or v1's "unlimited" near 2^63) or when it
// cannot be read. A cgroup path that is not mounted where
// /proc/self/cgroup says (a container's own namespace) is read at the
// mount's top.
func cgroupLimit(root string) uint64 {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, file = "sys/fs/cgroup", "memory.max"
		case hasController(parts[1], "memory"):
			dir, file = "sys/fs/cgroup/memory", "memory.limit_in_bytes"
		default:
			continue
		}
		for _, p := range []string{filepath.Join(root, dir, parts[2], file), filepath.Join(root, dir, file)} {
			if v, ok := readLimit(p); ok {
				if v > 0 {
					return v
				}
				break
			}
		}
	}
	return 0
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit reads a cgroup memory limit file: ok false if it cannot be
// read; 0 for no limit.
func readLimit(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, true
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false
	}
	if v >= 1<<62 { // cgroup v1's "no limit" is the largest page-aligned int64
		return 0, true
	}
	return v, true
}
