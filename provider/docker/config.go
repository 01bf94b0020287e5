package docker

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Config is the providers.docker section.
type Config struct {
	// Host is the engine's address: unix:///path/to.sock or tcp://host:port.
	// Default: $DOCKER_HOST, else unix:///var/run/docker.sock.
	Host string `yaml:"host"`
	// Name is this gateway's name on the engine: every container it makes
	// is labelled with it and named NAME-ID, so that gateways sharing an
	// engine never touch each other's homes. Default "wakegate".
	Name string `yaml:"name"`
	// Image is the image template of a home's container, with the
	// placeholders {version}, {target} and {id}. A home's options.image or
	// a roll target's image wins over it. Required unless every home names
	// its own image.
	Image string `yaml:"image"`
	// Command replaces the image's CMD (its ENTRYPOINT stays), with the
	// placeholders {version}, {target}, {id} and {port}. Default: the
	// image's own.
	Command []string `yaml:"command"`
	// Port is the TCP port the home listens on inside its container.
	// Default 8080.
	Port int `yaml:"port"`
	// Network is where a home's container is attached. "home" (default):
	// a network of its own, NAME-ID, made with the container and removed
	// with the home, so that no home's container can reach another's; the
	// port is published on 127.0.0.1 at a port the engine picks. "bridge":
	// the engine's shared default network, port published the same way.
	// "host": the host's network (the home listens on the host's
	// 127.0.0.1:{port} itself). Any other name: a network the gateway can
	// reach containers on (the endpoint is the container's address there).
	// Every mode but home lets the homes' containers reach each other.
	Network string `yaml:"network"`
	// Env are KEY=VALUE entries of every home's environment, before the
	// home's own.
	Env []string `yaml:"env"`
	// StopTimeout is how long a stop waits after SIGTERM before the engine
	// kills the container. Default 10s.
	StopTimeout time.Duration `yaml:"stop_timeout"`
	// Pull is when an image is pulled: "missing" (default: only when the
	// engine does not have it), "always" (before every create) or "never"
	// (a missing image is an error).
	Pull string `yaml:"pull"`
	// Suspend is what an idle suspend does: "stop" (default: the container
	// stops and frees its memory; its files survive) or "pause" (the
	// engine freezes its processes, which keep their memory and resume at
	// once).
	Suspend string `yaml:"suspend"`
	// PidsMax caps the processes and threads of each home's container
	// together (the engine's pids limit): a fork bomb in a home fails
	// there. A home's options.pids_max wins. Default 1024; -1: no limit
	// from the gateway (the engine's own default, if it has one).
	PidsMax int64 `yaml:"pids_max"`
	// CapAdd are the Linux capabilities every home's container keeps
	// ("NET_BIND_SERVICE", "CHOWN"); every other one is dropped. A home's
	// options.cap_add adds to them. Default none: no capability at all.
	CapAdd []string `yaml:"cap_add"`
	// User is who every home's container runs as: "uid", "uid:gid" or a
	// user of the image. A home's options.user wins. Default: the image's
	// own user (often root, though without capabilities).
	User string `yaml:"user"`
	// ReadOnly makes every home's root file system read-only, with an
	// empty tmpfs at /tmp (64 MiB, counted in the container's memory);
	// volumes stay as they are mounted. A home's options.read_only wins.
	// Default false.
	ReadOnly bool `yaml:"read_only"`
	// Discover makes every container labelled wakegate.enable=true a home
	// of its own, without a config entry (discover.go): found when the
	// gateway starts and kept current from the engine's events. Default
	// false.
	Discover bool `yaml:"discover"`
}

// Pull policies and suspend modes.
const (
	PullMissing  = "missing"
	PullAlways   = "always"
	PullNever    = "never"
	SuspendStop  = "stop"
	SuspendPause = "pause"
)

// Network modes with a meaning of their own; any other value names a
// network.
const (
	NetworkHome   = "home"
	NetworkBridge = "bridge"
	NetworkHost   = "host"
)

// DefaultPidsMax is the pids limit of a home's container when neither
// the section nor the home sets one.
const DefaultPidsMax = 1024

// DefaultHost is the engine's address when neither host nor $DOCKER_HOST
// names one.
const DefaultHost = "unix:///var/run/docker.sock"

// Defaults fills the fields left empty.
func (c *Config) Defaults() {
	if c.Host == "" {
		c.Host = os.Getenv("DOCKER_HOST")
	}
	if c.Host == "" {
		c.Host = DefaultHost
	}
	if c.Name == "" {
		c.Name = "wakegate"
	}
	if c.Port == 0 {
		c.Port = 8080
	}
	if c.Network == "" {
		c.Network = NetworkHome
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 10 * time.Second
	}
	if c.Pull == "" {
		c.Pull = PullMissing
	}
	if c.Suspend == "" {
		c.Suspend = SuspendStop
	}
	if c.PidsMax == 0 {
		c.PidsMax = DefaultPidsMax
	}
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// Check returns the problems of a defaulted section, by field.
func (c *Config) Check() map[string]string {
	ps := map[string]string{}
	if !strings.HasPrefix(c.Host, "unix://") && !strings.HasPrefix(c.Host, "tcp://") {
		ps["host"] = fmt.Sprintf("want unix:///path or tcp://host:port, got %q", c.Host)
	}
	if !nameRE.MatchString(c.Name) {
		ps["name"] = fmt.Sprintf("want 1-63 of [a-z0-9_.-] starting with a letter or digit, got %q", c.Name)
	}
	if c.Port < 1 || c.Port > 65535 {
		ps["port"] = fmt.Sprintf("want a port 1-65535, got %d", c.Port)
	}
	if c.StopTimeout < 0 {
		ps["stop_timeout"] = "must not be negative"
	}
	if c.Pull != PullMissing && c.Pull != PullAlways && c.Pull != PullNever {
		ps["pull"] = fmt.Sprintf("want missing, always or never, got %q", c.Pull)
	}
	if c.Suspend != SuspendStop && c.Suspend != SuspendPause {
		ps["suspend"] = fmt.Sprintf("want stop or pause, got %q", c.Suspend)
	}
	if c.Network == "none" {
		ps["network"] = "a home without a network cannot be reached: use home, bridge, host or a named network"
	}
	checkProcess(ps, c.Env, c.Command, c.PidsMax, c.CapAdd, c.User)
	return ps
}

// checkProcess checks, into ps, what the section and a home's options both
// say of a container's process: its environment, command, pids limit,
// added capabilities and user.
func checkProcess(ps map[string]string, env, command []string, pidsMax int64, capAdd []string, user string) {
	for i, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			ps[fmt.Sprintf("env[%d]", i)] = fmt.Sprintf("want KEY=VALUE, got %q", kv)
		}
	}
	if len(command) > 0 && strings.TrimSpace(command[0]) == "" {
		ps["command"] = "must not start with an empty word"
	}
	if pidsMax < -1 {
		ps["pids_max"] = fmt.Sprintf("want a number of processes, or -1 for none, got %d", pidsMax)
	}
	checkCaps(ps, "cap_add", capAdd)
	if user != "" {
		if err := checkUser(user); err != nil {
			ps["user"] = err.Error()
		}
	}
}

// HomeOptions are a docker home's options.
type HomeOptions struct {
	// Image is the home's own image template (placeholders as in image).
	Image string `json:"image,omitempty"`
	// Command replaces the section's command for this home.
	Command []string `json:"command,omitempty"`
	// Env are KEY=VALUE entries added after the section's and the home's.
	Env []string `json:"env,omitempty"`
	// Volumes are mounts, "NAME:/path[:ro]" (a named volume) or
	// "/host/path:/path[:ro]". Named volumes outlive the container, so a
	// roll keeps them.
	Volumes []string `json:"volumes,omitempty"`
	// MemoryMax caps the container's memory, in bytes: a number, or a
	// string read as exec homes' memory_max is ("256MiB", "1G" = 10^9).
	// Past it the engine's kernel reclaims, then kills a process of the
	// home. Default (zero): no limit.
	MemoryMax Size `json:"memory_max,omitempty"`
	// CPUMax caps the container's CPU time, in cores: 0.5 is half of one
	// core, 2 is two. Default (zero): no limit.
	CPUMax float64 `json:"cpu_max,omitempty"`
	// Memory is the older spelling of MemoryMax: a byte count with an
	// optional k, m or g suffix, powers of 1024 ("512m"). Not both.
	Memory string `json:"memory,omitempty"`
	// CPUs is the older spelling of CPUMax. Not both.
	CPUs float64 `json:"cpus,omitempty"`
	// PidsMax is this home's pids limit (as the section's pids_max; -1:
	// none from the gateway). Default (zero): the section's.
	PidsMax int64 `json:"pids_max,omitempty"`
	// CapAdd are capabilities this home's container keeps beyond the
	// section's cap_add. Default none.
	CapAdd []string `json:"cap_add,omitempty"`
	// User is who this home's container runs as (as the section's user).
	// Default: the section's.
	User string `json:"user,omitempty"`
	// ReadOnly makes this home's root file system read-only (true) or
	// writable (false), whatever the section says. Default: the section's.
	ReadOnly *bool `json:"read_only,omitempty"`
	// Members make the home a group of containers (group.go): each a
	// name, an image, optional env, command and depends_on, and exactly
	// one the entry, which the gateway forwards to. The limits, user,
	// capabilities and root file system above apply to every member.
	// Default none: the home is one container.
	Members []Member `json:"members,omitempty"`
	// Container names (or is the id of) a container that exists already:
	// the home is that container, which the gateway starts and stops but
	// never makes, recreates or deletes (existing.go). Image, command,
	// env, volumes and limits are the container's own. Default: none, the
	// gateway makes the home's container.
	Container string `json:"container,omitempty"`
	// Port is the container's port the gateway forwards to, for a home of
	// an existing container. Default: the one TCP port its image exposes.
	Port int `json:"port,omitempty"`
}

// Check returns the problems of a home's options, by field.
func (o *HomeOptions) Check() map[string]string {
	ps := map[string]string{}
	checkProcess(ps, o.Env, o.Command, o.PidsMax, o.CapAdd, o.User)
	checkMembers(ps, o)
	for i, v := range o.Volumes {
		if err := checkVolume(v); err != nil {
			ps[fmt.Sprintf("volumes[%d]", i)] = err.Error()
		}
	}
	if o.Memory != "" {
		if _, err := parseBytes(o.Memory); err != nil {
			ps["memory"] = err.Error()
		}
		if o.MemoryMax != 0 {
			ps["memory"] = "memory is the older spelling of memory_max: set one of them"
		}
	}
	if o.MemoryMax < 0 || (o.MemoryMax > 0 && o.MemoryMax < 1<<20) {
		ps["memory_max"] = fmt.Sprintf("want at least 1MiB, got %d bytes", o.MemoryMax)
	}
	if o.CPUs < 0 {
		ps["cpus"] = "must not be negative"
	}
	if o.CPUs != 0 && o.CPUMax != 0 {
		ps["cpus"] = "cpus is the older spelling of cpu_max: set one of them"
	}
	if o.CPUMax < 0 || (o.CPUMax > 0 && o.CPUMax < 0.01) {
		ps["cpu_max"] = fmt.Sprintf("want at least 0.01 (cores), got %g", o.CPUMax)
	}
	o.checkExisting(ps)
	return ps
}

// checkVolume checks "SOURCE:/path[:ro|rw]".
func checkVolume(v string) error {
	parts := strings.Split(v, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
		return fmt.Errorf("want NAME:/path or /host/path:/path, optionally :ro, got %q", v)
	}
	if !path.IsAbs(parts[1]) {
		return fmt.Errorf("the path inside the container must be absolute, got %q", parts[1])
	}
	if len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw" {
		return fmt.Errorf("the mode must be ro or rw, got %q", parts[2])
	}
	return nil
}

// parseBytes reads "512m", "1g", "65536" as a byte count.
func parseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "b")
	mult := int64(1)
	switch {
	case strings.HasSuffix(t, "k"):
		mult, t = 1<<10, strings.TrimSuffix(t, "k")
	case strings.HasSuffix(t, "m"):
		mult, t = 1<<20, strings.TrimSuffix(t, "m")
	case strings.HasSuffix(t, "g"):
		mult, t = 1<<30, strings.TrimSuffix(t, "g")
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("want a size such as 512m or 1g, got %q", s)
	}
	return n * mult, nil
}
