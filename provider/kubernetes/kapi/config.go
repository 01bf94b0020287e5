package kapi

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// In-cluster paths of the pod's service account.
const (
	ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	tokenFile         = "token"
	caFile            = "ca.crt"
	namespaceFile     = "namespace"
)

// Config is where the API server is and how to authenticate to it.
type Config struct {
	// Server is the API server's base URL, https://host:port.
	Server string
	// CA is the PEM of the server's certificate authority; nil: the
	// system's roots.
	CA []byte
	// Insecure skips the server's certificate check (a kubeconfig's
	// insecure-skip-tls-verify).
	Insecure bool
	// Token is a bearer token; TokenFile, when set, is read instead and
	// read again whenever it changes (a projected token rotates).
	Token     string
	TokenFile string
	// CertPEM and KeyPEM are a client certificate, when the kubeconfig
	// names one.
	CertPEM, KeyPEM []byte
	// Namespace is the context's namespace (in a cluster: the pod's own);
	// "" when none is said.
	Namespace string
	// Source says where this came from, for messages: the kubeconfig's
	// path and context, or "in-cluster".
	Source string
}

// kubeconfig is the part of a kubeconfig file read here.
type kubeconfig struct {
	CurrentContext string `yaml:"current-context"`
	Clusters       []struct {
		Name    string `yaml:"name"`
		Cluster struct {
			Server   string `yaml:"server"`
			CA       string `yaml:"certificate-authority"`
			CAData   string `yaml:"certificate-authority-data"`
			Insecure bool   `yaml:"insecure-skip-tls-verify"`
		} `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User struct {
			Token      string `yaml:"token"`
			TokenFile  string `yaml:"tokenFile"`
			Cert       string `yaml:"client-certificate"`
			CertData   string `yaml:"client-certificate-data"`
			Key        string `yaml:"client-key"`
			KeyData    string `yaml:"client-key-data"`
			Exec       any    `yaml:"exec"`
			AuthPlugin any    `yaml:"auth-provider"`
		} `yaml:"user"`
	} `yaml:"users"`
	Contexts []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster   string `yaml:"cluster"`
			User      string `yaml:"user"`
			Namespace string `yaml:"namespace"`
		} `yaml:"context"`
	} `yaml:"contexts"`
}

// LoadKubeconfig reads the kubeconfig at path and returns its context
// named name ("" for its current-context). Relative file names in it are
// relative to the file's folder, as kubectl reads them. exec and
// auth-provider users are refused: the gateway runs no plugins.
func LoadKubeconfig(path, name string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("kubeconfig: %w", err)
	}
	var k kubeconfig
	if err := yaml.Unmarshal(b, &k); err != nil {
		return Config{}, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if name == "" {
		name = k.CurrentContext
	}
	if name == "" {
		return Config{}, fmt.Errorf("kubeconfig %s has no current-context: name one in providers.kubernetes.context", path)
	}
	c := Config{Source: fmt.Sprintf("kubeconfig %s, context %s", path, name)}
	var cluster, user string
	found := false
	for _, x := range k.Contexts {
		if x.Name == name {
			cluster, user, c.Namespace, found = x.Context.Cluster, x.Context.User, x.Context.Namespace, true
		}
	}
	if !found {
		return Config{}, fmt.Errorf("kubeconfig %s has no context %q", path, name)
	}
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	found = false
	for _, x := range k.Clusters {
		if x.Name != cluster {
			continue
		}
		found = true
		c.Server, c.Insecure = strings.TrimSuffix(x.Cluster.Server, "/"), x.Cluster.Insecure
		if c.CA, err = fileOrData(rel(x.Cluster.CA), x.Cluster.CAData); err != nil {
			return Config{}, fmt.Errorf("kubeconfig %s: cluster %s: certificate authority: %w", path, cluster, err)
		}
	}
	if !found || c.Server == "" {
		return Config{}, fmt.Errorf("kubeconfig %s: context %s names cluster %q, which has no server", path, name, cluster)
	}
	for _, x := range k.Users {
		if x.Name != user {
			continue
		}
		u := x.User
		if u.Exec != nil || u.AuthPlugin != nil {
			return Config{}, fmt.Errorf("kubeconfig %s: user %s authenticates through a plugin (exec or auth-provider), "+
				"which the gateway does not run: give it a token, a token file or a client certificate", path, user)
		}
		c.Token, c.TokenFile = u.Token, rel(u.TokenFile)
		if c.CertPEM, err = fileOrData(rel(u.Cert), u.CertData); err != nil {
			return Config{}, fmt.Errorf("kubeconfig %s: user %s: client certificate: %w", path, user, err)
		}
		if c.KeyPEM, err = fileOrData(rel(u.Key), u.KeyData); err != nil {
			return Config{}, fmt.Errorf("kubeconfig %s: user %s: client key: %w", path, user, err)
		}
	}
	return c, nil
}

func fileOrData(file, data string) ([]byte, error) {
	if data != "" {
		return base64.StdEncoding.DecodeString(data)
	}
	if file == "" {
		return nil, nil
	}
	return os.ReadFile(file)
}

// InCluster is the config of a pod: the API server from
// KUBERNETES_SERVICE_HOST and _PORT, the service account's CA, token file
// and namespace under dir (ServiceAccountDir in a pod).
func InCluster(dir string) (Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return Config{}, errors.New("not in a cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset): " +
			"set providers.kubernetes.kubeconfig")
	}
	ca, err := os.ReadFile(filepath.Join(dir, caFile))
	if err != nil {
		return Config{}, fmt.Errorf("in-cluster: the service account's CA: %w (is a service account token mounted?)", err)
	}
	c := Config{Server: "https://" + net.JoinHostPort(host, port), CA: ca,
		TokenFile: filepath.Join(dir, tokenFile), Source: "in-cluster"}
	if ns, err := os.ReadFile(filepath.Join(dir, namespaceFile)); err == nil {
		c.Namespace = strings.TrimSpace(string(ns))
	}
	return c, nil
}

// tlsConfig is c's TLS client config.
func (c Config) tlsConfig() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.Insecure} //nolint:gosec // the kubeconfig asks for it
	if len(c.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(c.CA) {
			return nil, fmt.Errorf("%s: the certificate authority holds no PEM certificate", c.Source)
		}
		t.RootCAs = pool
	}
	if len(c.CertPEM) > 0 {
		cert, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s: client certificate: %w", c.Source, err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}

// tokenSource hands out the bearer token, reading a token file again when
// its modification time or size changed since the last read.
type tokenSource struct {
	fixed string
	file  string
	mu    sync.Mutex
	token string
	mod   time.Time
	size  int64
}

func (s *tokenSource) get() (string, error) {
	if s.file == "" {
		return s.fixed, nil
	}
	fi, err := os.Stat(s.file)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && fi.ModTime().Equal(s.mod) && fi.Size() == s.size {
		return s.token, nil
	}
	b, err := os.ReadFile(s.file)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	s.token, s.mod, s.size = strings.TrimSpace(string(b)), fi.ModTime(), fi.Size()
	return s.token, nil
}
