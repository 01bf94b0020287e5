package kubernetes

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the providers.kubernetes section.
type Config struct {
	// Kubeconfig is the path of a kubeconfig file. Default "": in-cluster
	// (the pod's service account; KUBERNETES_SERVICE_HOST and _PORT).
	Kubeconfig string `yaml:"kubeconfig"`
	// Context is the kubeconfig's context. Default: its current-context.
	Context string `yaml:"context"`
	// Namespace is where homes live that name none, and where discovery
	// looks. Default: the context's namespace (in a cluster: the pod's
	// own), else "default".
	Namespace string `yaml:"namespace"`
	// Owner is this gateway's name in the annotation wakegate.io/owner of
	// the workloads it scales. Default: the host's name (the pod's name in
	// a cluster).
	Owner string `yaml:"owner"`
	// StopTimeout is how long a stop waits for the home's last pod to be
	// gone before it reports the stop as not proven. Default 60s.
	StopTimeout time.Duration `yaml:"stop_timeout"`
	// Discover makes every Deployment of the namespace annotated
	// wakegate.enable: "true" a home of its own, without a config entry
	// (discover.go). Default false.
	Discover bool `yaml:"discover"`
}

// Defaults fills what the section left out (the namespace and the owner
// are filled once connected: they come from the cluster and the host).
func (c *Config) Defaults() {
	if c.StopTimeout <= 0 {
		c.StopTimeout = 60 * time.Second
	}
}

// Kinds of home.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindPod         = "Pod"
)

// Where a home's traffic goes.
const (
	ForwardPod     = "pod"
	ForwardService = "service"
)

// HomeOptions are a kubernetes home's options.
type HomeOptions struct {
	// Kind is Deployment (default), StatefulSet or Pod.
	Kind string `json:"kind,omitempty"`
	// Name is the workload's name. Required for a Deployment or a
	// StatefulSet; a Pod's default is "wakegate-{id}".
	Name string `json:"name,omitempty"`
	// Namespace is the workload's namespace. Default: the section's.
	Namespace string `json:"namespace,omitempty"`
	// Container is the container that serves and that a roll changes.
	// Default: the pod's first.
	Container string `json:"container,omitempty"`
	// Port is the container's port the gateway forwards to (forward: pod).
	// Default 8080.
	Port int `json:"port,omitempty"`
	// Forward is where traffic goes: "pod" (default: the pod's IP and
	// port; the gateway runs in the cluster) or "service" (a Service).
	Forward string `json:"forward,omitempty"`
	// Service is the Service's name (forward: service). Default: Name.
	Service string `json:"service,omitempty"`
	// ServicePort is the Service's port. Default: Port.
	ServicePort int `json:"service_port,omitempty"`
	// Address, with forward: service, is the base URL to forward to in
	// place of http://SERVICE.NAMESPACE.svc:SERVICE_PORT.
	Address string `json:"address,omitempty"`
	// Image is the image template a roll sets on the container, with
	// {version}. A roll target's image wins. Required for rolls.
	Image string `json:"image,omitempty"`
	// Pod is a Pod home's pod spec (an object, or a string of YAML or
	// JSON), with {version}, {image}, {id} and {target} replaced. Required
	// for kind: Pod.
	Pod json.RawMessage `json:"pod,omitempty"`
}

var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// fill sets the defaults of o for home id, ns being the section's
// namespace.
func (o *HomeOptions) fill(id, ns string) {
	if o.Kind == "" {
		o.Kind = KindDeployment
	}
	if o.Name == "" && o.Kind == KindPod {
		o.Name = "wakegate-" + id
	}
	if o.Namespace == "" {
		o.Namespace = ns
	}
	if o.Port == 0 {
		o.Port = 8080
	}
	if o.Forward == "" {
		o.Forward = ForwardPod
	}
	if o.Service == "" {
		o.Service = o.Name
	}
	if o.ServicePort == 0 {
		o.ServicePort = o.Port
	}
}

// Check returns the problems of o, field -> message.
func (o HomeOptions) Check() map[string]string {
	ps := map[string]string{}
	switch o.Kind {
	case "", KindDeployment, KindStatefulSet:
		if o.Name == "" {
			ps["name"] = "a Deployment or StatefulSet home names its workload"
		}
		if len(o.Pod) > 0 {
			ps["pod"] = "only a home of kind Pod takes a pod template"
		}
	case KindPod:
		if len(o.Pod) == 0 {
			ps["pod"] = "a Pod home needs its pod spec (containers, ...)"
		} else if _, err := podSpec(o.Pod, nil); err != nil {
			ps["pod"] = err.Error()
		}
	default:
		ps["kind"] = fmt.Sprintf("want Deployment, StatefulSet or Pod, got %q", o.Kind)
	}
	if o.Name != "" && (len(o.Name) > 253 || !dnsName.MatchString(o.Name)) {
		ps["name"] = fmt.Sprintf("not a Kubernetes object name: %q", o.Name)
	}
	if o.Namespace != "" && (len(o.Namespace) > 63 || !dnsName.MatchString(o.Namespace)) {
		ps["namespace"] = fmt.Sprintf("not a namespace name: %q", o.Namespace)
	}
	if o.Port < 0 || o.Port > 65535 {
		ps["port"] = fmt.Sprintf("not a port number: %d", o.Port)
	}
	if o.ServicePort < 0 || o.ServicePort > 65535 {
		ps["service_port"] = fmt.Sprintf("not a port number: %d", o.ServicePort)
	}
	switch o.Forward {
	case "", ForwardPod:
		if o.Service != "" || o.Address != "" || o.ServicePort != 0 {
			ps["forward"] = "service, service_port and address go with forward: service"
		}
	case ForwardService:
		if o.Service != "" && !dnsName.MatchString(o.Service) {
			ps["service"] = fmt.Sprintf("not a Service name: %q", o.Service)
		}
		if o.Address != "" {
			u, err := url.Parse(o.Address)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
				ps["address"] = fmt.Sprintf("want a base URL such as http://web.team.svc:8080, got %q", o.Address)
			}
		}
	default:
		ps["forward"] = fmt.Sprintf("want pod or service, got %q", o.Forward)
	}
	if o.Image != "" && strings.ContainsAny(o.Image, " \t\n") {
		ps["image"] = fmt.Sprintf("not an image reference: %q", o.Image)
	}
	return ps
}

// podSpec decodes a Pod home's template (an object, or a string of YAML
// or JSON) with repl's placeholders replaced in its text, and returns the
// spec as JSON. A spec without containers is refused.
func podSpec(raw json.RawMessage, repl *strings.Replacer) (json.RawMessage, error) {
	var s string
	var spec map[string]any
	if json.Unmarshal(raw, &s) == nil {
		if repl != nil {
			s = repl.Replace(s)
		}
		if err := yaml.Unmarshal([]byte(s), &spec); err != nil {
			return nil, fmt.Errorf("the pod spec is no YAML or JSON object: %w", err)
		}
	} else {
		text := string(raw)
		if repl != nil {
			text = repl.Replace(text)
		}
		if err := json.Unmarshal([]byte(text), &spec); err != nil {
			return nil, fmt.Errorf("the pod spec is no object: %w", err)
		}
	}
	cs, _ := spec["containers"].([]any)
	if len(cs) == 0 {
		return nil, fmt.Errorf("the pod spec has no containers")
	}
	return json.Marshal(spec)
}

// jsonReplacer replaces each placeholder with its value escaped for the
// inside of a JSON string (a template's text is JSON or YAML; both read
// the escapes of a quoted string).
func jsonReplacer(kv ...string) *strings.Replacer {
	out := make([]string, 0, len(kv))
	for i := 0; i+1 < len(kv); i += 2 {
		b, _ := json.Marshal(kv[i+1])
		out = append(out, kv[i], string(b[1:len(b)-1]))
	}
	return strings.NewReplacer(out...)
}
