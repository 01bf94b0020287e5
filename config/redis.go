package config

import (
	"net/url"
	"strconv"
	"time"

	"github.com/wakegate/wakegate/internal/provconf"
	"github.com/wakegate/wakegate/registry/redis"
)

// RedisConfig selects the shared store of a fleet. Without url and addrs
// the gateway keeps its state in the embedded store under data_dir, for
// itself alone.
type RedisConfig struct {
	// URL is redis://[user:password@]host:port[/db] or rediss://... for
	// TLS. With master_name it gives the credentials and database, and
	// addrs lists the sentinels. Default "": no Redis.
	URL string `yaml:"url"`
	// Password is a secret reference (env:NAME or file:PATH) for the
	// password, used instead of one written in url. Default "": the url's.
	Password string `yaml:"password"`
	// Addrs are the sentinels (with master_name) or a Redis Cluster's seed
	// nodes (with cluster: true), host:port each. Default none.
	Addrs []string `yaml:"addrs"`
	// MasterName is the Sentinel master's name; it selects Sentinel.
	// Default "": no Sentinel.
	MasterName string `yaml:"master_name"`
	// Cluster selects Redis Cluster over addrs. Default false.
	Cluster bool `yaml:"cluster"`
	// Prefix is the hash tag of every key, so that fleets can share a
	// server. Default "wakegate"; empty means the default.
	Prefix string `yaml:"prefix"`
	// DialTimeout bounds opening a connection. Default 1s; zero means the
	// default.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// ReadTimeout bounds the wait for one reply. Default 1s; zero means the
	// default.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing one command. Default 1s; zero means the
	// default.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// PoolTimeout bounds the wait for a free connection. Default 1s; zero
	// means the default.
	PoolTimeout time.Duration `yaml:"pool_timeout"`
	// PoolSize is the most connections per node. Default 32; zero means
	// the default.
	PoolSize int `yaml:"pool_size"`
}

// Enabled reports whether a Redis store is configured.
func (r *RedisConfig) Enabled() bool { return r.URL != "" || len(r.Addrs) > 0 }

func (r *RedisConfig) validate(k checker) {
	if !r.Enabled() {
		return
	}
	k.nonNegative(namedDuration{"dial_timeout", r.DialTimeout}, namedDuration{"read_timeout", r.ReadTimeout},
		namedDuration{"write_timeout", r.WriteTimeout}, namedDuration{"pool_timeout", r.PoolTimeout})
	if r.URL != "" {
		u, err := url.Parse(r.URL)
		switch {
		case err != nil:
			k.bad("url", "not a URL")
		case u.Scheme != "redis" && u.Scheme != "rediss":
			k.bad("url", "want a redis:// or rediss:// URL, got scheme %q", u.Scheme)
		case u.Host == "" && r.MasterName == "":
			k.bad("url", "names no host")
		}
	}
	for i, a := range r.Addrs {
		k.hostPort("addrs["+strconv.Itoa(i)+"]", a, "host:port")
	}
	if r.MasterName != "" && r.Cluster {
		k.bad("cluster", "master_name selects Sentinel; a Cluster takes no master name")
	}
	if r.MasterName != "" && len(r.Addrs) == 0 {
		k.bad("addrs", "master_name needs the sentinels' addresses")
	}
	if r.Password != "" {
		if _, err := provconf.ResolveSecret(r.Password); err != nil {
			k.bad("password", "%v", err)
		}
	}
	if r.PoolSize < 0 {
		k.bad("pool_size", "must not be negative, got %d", r.PoolSize)
	}
}

// Options returns the store's options; the password reference is resolved
// (validate checked that it resolves).
func (r *RedisConfig) Options() (redis.Options, error) {
	o := redis.Options{
		URL: r.URL, Addrs: r.Addrs, MasterName: r.MasterName, Cluster: r.Cluster, Prefix: r.Prefix,
		DialTimeout: r.DialTimeout, ReadTimeout: r.ReadTimeout, WriteTimeout: r.WriteTimeout,
		PoolTimeout: r.PoolTimeout, PoolSize: r.PoolSize,
	}
	if r.Password != "" {
		pw, err := provconf.ResolveSecret(r.Password)
		if err != nil {
			return o, err
		}
		o.Password = pw
	}
	return o, nil
}
