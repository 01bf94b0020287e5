package kubetest

import (
	"encoding/json"
	"strconv"
)

// The few fields of the Pod API the agent reads.

type pod struct {
	Metadata struct {
		Name                       string  `json:"name"`
		Namespace                  string  `json:"namespace"`
		UID                        string  `json:"uid"`
		ResourceVersion            string  `json:"resourceVersion"`
		DeletionTimestamp          *string `json:"deletionTimestamp"`
		DeletionGracePeriodSeconds *int64  `json:"deletionGracePeriodSeconds"`
	} `json:"metadata"`
	Spec struct {
		NodeName      string      `json:"nodeName"`
		RestartPolicy string      `json:"restartPolicy"`
		Containers    []container `json:"containers"`
	} `json:"spec"`
	Status struct {
		Phase      string         `json:"phase"`
		Conditions []podCondition `json:"conditions"`
		StartTime  string         `json:"startTime"`
	} `json:"status"`
}

type container struct {
	Name           string   `json:"name"`
	Image          string   `json:"image"`
	Command        []string `json:"command"`
	Args           []string `json:"args"`
	WorkingDir     string   `json:"workingDir"`
	Env            []envVar `json:"env"`
	Ports          []port   `json:"ports"`
	ReadinessProbe *probe   `json:"readinessProbe"`
}

type port struct {
	Name          string `json:"name"`
	ContainerPort int    `json:"containerPort"`
}

type envVar struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `json:"fieldPath"`
		} `json:"fieldRef"`
	} `json:"valueFrom"`
}

type probe struct {
	HTTPGet *struct {
		Path        string      `json:"path"`
		Port        intOrString `json:"port"`
		Host        string      `json:"host"`
		Scheme      string      `json:"scheme"`
		HTTPHeaders []nameValue `json:"httpHeaders"`
	} `json:"httpGet"`
	TCPSocket *struct {
		Port intOrString `json:"port"`
		Host string      `json:"host"`
	} `json:"tcpSocket"`
	InitialDelaySeconds int `json:"initialDelaySeconds"`
	TimeoutSeconds      int `json:"timeoutSeconds"`
	PeriodSeconds       int `json:"periodSeconds"`
	SuccessThreshold    int `json:"successThreshold"`
	FailureThreshold    int `json:"failureThreshold"`
}

type nameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// intOrString is a port given as a number or a container port's name.
type intOrString struct {
	num  int
	name string
}

func (v *intOrString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &v.name)
	}
	return json.Unmarshal(b, &v.num)
}

// resolve returns the port number, looking a name up in ports.
func (v intOrString) resolve(ports []port) (int, bool) {
	if v.name == "" {
		return v.num, v.num > 0
	}
	if n, err := strconv.Atoi(v.name); err == nil {
		return n, true
	}
	for _, p := range ports {
		if p.Name == v.name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

type podCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// The status the agent writes.

type podStatus struct {
	Phase             string            `json:"phase"`
	HostIP            string            `json:"hostIP"`
	HostIPs           []ipEntry         `json:"hostIPs"`
	PodIP             string            `json:"podIP,omitempty"`
	PodIPs            []ipEntry         `json:"podIPs,omitempty"`
	StartTime         string            `json:"startTime"`
	Conditions        []podCondition    `json:"conditions"`
	ContainerStatuses []containerStatus `json:"containerStatuses"`
}

type ipEntry struct {
	IP string `json:"ip"`
}

type containerStatus struct {
	Name         string         `json:"name"`
	Image        string         `json:"image"`
	ImageID      string         `json:"imageID"`
	ContainerID  string         `json:"containerID,omitempty"`
	Ready        bool           `json:"ready"`
	Started      bool           `json:"started"`
	RestartCount int            `json:"restartCount"`
	State        containerState `json:"state"`
	LastState    containerState `json:"lastState"`
}

type containerState struct {
	Waiting    *waitingState    `json:"waiting,omitempty"`
	Running    *runningState    `json:"running,omitempty"`
	Terminated *terminatedState `json:"terminated,omitempty"`
}

type waitingState struct {
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

type runningState struct {
	StartedAt string `json:"startedAt"`
}

type terminatedState struct {
	ExitCode    int    `json:"exitCode"`
	Signal      int    `json:"signal,omitempty"`
	Reason      string `json:"reason"`
	StartedAt   string `json:"startedAt"`
	FinishedAt  string `json:"finishedAt"`
	ContainerID string `json:"containerID,omitempty"`
}
