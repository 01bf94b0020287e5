package kapi

import "encoding/json"

// Meta is an object's metadata, the fields read here.
type Meta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	CreationTimestamp string            `json:"creationTimestamp,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	DeletionTimestamp *string           `json:"deletionTimestamp,omitempty"`
}

// ListMeta is a list's metadata.
type ListMeta struct {
	ResourceVersion string `json:"resourceVersion"`
}

// List is a list of objects of any kind.
type List struct {
	Metadata ListMeta          `json:"metadata"`
	Items    []json.RawMessage `json:"items"`
}

// Scale is the scale subresource of a Deployment or a StatefulSet.
type Scale struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   Meta   `json:"metadata"`
	Spec       struct {
		Replicas int32 `json:"replicas"`
	} `json:"spec"`
	Status struct {
		Replicas int32 `json:"replicas"`
	} `json:"status"`
}

// Workload is a Deployment or a StatefulSet: the fields read here.
type Workload struct {
	Metadata Meta `json:"metadata"`
	Spec     struct {
		Replicas *int32 `json:"replicas"`
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Template struct {
			Metadata Meta    `json:"metadata"`
			Spec     PodSpec `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// Pod is a pod: the fields read here.
type Pod struct {
	Metadata Meta      `json:"metadata"`
	Spec     PodSpec   `json:"spec"`
	Status   PodStatus `json:"status"`
}

// PodSpec is a pod's spec: the fields read here.
type PodSpec struct {
	Containers []Container `json:"containers"`
}

// Container is a container of a pod spec: the fields read here.
type Container struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	Ports []struct {
		ContainerPort int `json:"containerPort"`
	} `json:"ports,omitempty"`
}

// PodStatus is a pod's status: the fields read here.
type PodStatus struct {
	Phase             string            `json:"phase"`
	PodIP             string            `json:"podIP"`
	Reason            string            `json:"reason"`
	Message           string            `json:"message"`
	Conditions        []Condition       `json:"conditions"`
	ContainerStatuses []ContainerStatus `json:"containerStatuses"`
}

// Condition is a pod condition.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// ContainerStatus is one container's status.
type ContainerStatus struct {
	Name         string         `json:"name"`
	Image        string         `json:"image"`
	Ready        bool           `json:"ready"`
	RestartCount int32          `json:"restartCount"`
	State        ContainerState `json:"state"`
	LastState    ContainerState `json:"lastState"`
}

// ContainerState is one of waiting, running or terminated.
type ContainerState struct {
	Waiting *struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"waiting,omitempty"`
	Running *struct {
		StartedAt string `json:"startedAt"`
	} `json:"running,omitempty"`
	Terminated *struct {
		ExitCode int32  `json:"exitCode"`
		Reason   string `json:"reason"`
		Message  string `json:"message"`
	} `json:"terminated,omitempty"`
}

// Condition returns the pod's condition of type t ("Ready",
// "PodScheduled"), and whether it has one.
func (p *Pod) Condition(t string) (Condition, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return Condition{}, false
}

// Ready reports whether the pod's Ready condition is True.
func (p *Pod) Ready() bool {
	c, ok := p.Condition("Ready")
	return ok && c.Status == "True"
}

// Deleting reports whether the pod is being deleted.
func (p *Pod) Deleting() bool { return p.Metadata.DeletionTimestamp != nil }
