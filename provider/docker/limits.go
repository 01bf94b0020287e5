package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/container"

	"github.com/wakegate/wakegate/provider"
)

// Size is a memory size in bytes, read as exec homes' memory_max is
// (provider.MemorySize).
type Size = provider.MemorySize

// capabilities are the Linux capabilities a cap_add may name, without
// their CAP_ prefix.
var capabilities = []string{
	"AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND", "BPF", "CHECKPOINT_RESTORE", "CHOWN",
	"DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER", "KILL", "LEASE",
	"LINUX_IMMUTABLE", "MAC_ADMIN", "MAC_OVERRIDE", "MKNOD", "NET_ADMIN", "NET_BIND_SERVICE",
	"NET_BROADCAST", "NET_RAW", "PERFMON", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYSLOG",
	"SYS_ADMIN", "SYS_BOOT", "SYS_CHROOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE",
	"SYS_RAWIO", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "WAKE_ALARM",
}

// capName is the engine's name of capability c ("net_bind_service" and
// "CAP_NET_BIND_SERVICE" are "CAP_NET_BIND_SERVICE"), or an error naming
// what c is not.
func capName(c string) (string, error) {
	n := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(c)), "CAP_")
	if n == "ALL" {
		return "", fmt.Errorf("name the capabilities the home needs, not ALL")
	}
	if !slices.Contains(capabilities, n) {
		return "", fmt.Errorf("%q is not a Linux capability (such as NET_BIND_SERVICE, CHOWN, SETUID)", c)
	}
	return "CAP_" + n, nil
}

// checkCaps adds the problems of a cap_add list to ps, by field.
func checkCaps(ps map[string]string, field string, caps []string) {
	for i, c := range caps {
		if _, err := capName(c); err != nil {
			ps[fmt.Sprintf("%s[%d]", field, i)] = err.Error()
		}
	}
}

// checkUser returns why u is not a user a container can run as.
func checkUser(u string) error {
	if strings.TrimSpace(u) != u || strings.ContainsAny(u, " \t\n") || strings.Count(u, ":") > 1 ||
		strings.HasPrefix(u, ":") || strings.HasSuffix(u, ":") {
		return fmt.Errorf("want uid, uid:gid or a user of the image, got %q", u)
	}
	return nil
}

// tmpfsTmp is the mount of /tmp in a read-only home: writable by every
// user, nothing run from it, at most 64 MiB (in the container's memory).
const tmpfsTmp = "rw,nosuid,nodev,noexec,mode=1777,size=64m"

// isolation is what a home's container is allowed, from the section and
// the home's options; create applies it, and its digest labels the
// container so that a stopped container made with other settings is made
// again.
type isolation struct {
	Network  string   // the network the container is attached to
	CapAdd   []string // CAP_ names kept; every other is dropped
	User     string   // "" for the image's
	ReadOnly bool
	Tmp      bool  // a tmpfs at /tmp (read-only root, no volume there)
	Pids     int64 // -1: none from the gateway
	Memory   int64 // bytes; 0: none
	NanoCPUs int64 // 0: none
}

// isolationOf is home s's isolation (options checked at load).
func (p *Provider) isolationOf(s provider.Spec, o HomeOptions) isolation {
	is := isolation{Network: p.containerNetwork(s.ID), User: p.cfg.User, ReadOnly: p.cfg.ReadOnly, Pids: p.cfg.PidsMax}
	for _, c := range slices.Concat(p.cfg.CapAdd, o.CapAdd) {
		if n, err := capName(c); err == nil && !slices.Contains(is.CapAdd, n) {
			is.CapAdd = append(is.CapAdd, n)
		}
	}
	slices.Sort(is.CapAdd)
	if o.User != "" {
		is.User = o.User
	}
	if o.ReadOnly != nil {
		is.ReadOnly = *o.ReadOnly
	}
	if o.PidsMax != 0 {
		is.Pids = o.PidsMax
	}
	is.Memory = int64(o.MemoryMax)
	if o.Memory != "" {
		is.Memory, _ = parseBytes(o.Memory)
	}
	cpus := o.CPUMax
	if o.CPUs > 0 {
		cpus = o.CPUs
	}
	is.NanoCPUs = int64(cpus * 1e9)
	if is.ReadOnly {
		is.Tmp = true
		for _, v := range o.Volumes {
			if parts := strings.Split(v, ":"); len(parts) > 1 && path.Clean(parts[1]) == "/tmp" {
				is.Tmp = false
			}
		}
	}
	return is
}

// digest is a short fingerprint of is, for the container's label.
func (is isolation) digest() string {
	b, _ := json.Marshal(is)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// apply sets is on a container's host config.
func (is isolation) apply(cfg *container.Config, hc *container.HostConfig) {
	hc.NetworkMode = container.NetworkMode(is.Network)
	hc.CapDrop = []string{"ALL"}
	hc.CapAdd = is.CapAdd
	hc.SecurityOpt = []string{"no-new-privileges"}
	hc.ReadonlyRootfs = is.ReadOnly
	if is.Tmp {
		hc.Tmpfs = map[string]string{"/tmp": tmpfsTmp}
	}
	if is.Pids > 0 {
		pids := is.Pids
		hc.PidsLimit = &pids
	}
	hc.Memory = is.Memory
	hc.NanoCPUs = is.NanoCPUs
	cfg.User = is.User
}
