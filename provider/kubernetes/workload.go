package kubernetes

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/kubernetes/kapi"
)

// conflictTries bounds the fresh reads after 409 Conflict of one write.
const conflictTries = 8

// resource is the workload's resource name for RBAC and paths.
func resource(o HomeOptions) string {
	switch o.Kind {
	case KindStatefulSet:
		return "statefulsets"
	case KindPod:
		return "pods"
	}
	return "deployments"
}

// workloadPath is the API path of o's workload.
func workloadPath(o HomeOptions) string {
	if o.Kind == KindPod {
		return "/api/v1/namespaces/" + o.Namespace + "/pods/" + o.Name
	}
	return "/apis/apps/v1/namespaces/" + o.Namespace + "/" + resource(o) + "/" + o.Name
}

// getWorkload reads o's Deployment or StatefulSet.
func (p *Provider) getWorkload(ctx context.Context, op, id string, o HomeOptions) (*kapi.Workload, error) {
	var w kapi.Workload
	if err := p.client.Do(ctx, http.MethodGet, workloadPath(o), "", nil, &w); err != nil {
		return nil, p.apiError(op, id, call{"get", resource(o), o.Namespace, o.Name}, err)
	}
	return &w, nil
}

// selector returns the labels of the workload's pods (its
// spec.selector.matchLabels, which never changes), read once; nil for a
// Pod home.
func (p *Provider) selector(ctx context.Context, op, id string, o HomeOptions) (map[string]string, error) {
	if o.Kind == KindPod {
		return nil, nil
	}
	key := o.Kind + "/" + o.Namespace + "/" + o.Name
	p.mu.Lock()
	sel, ok := p.selectors[key]
	p.mu.Unlock()
	if ok {
		return sel, nil
	}
	w, err := p.getWorkload(ctx, op, id, o)
	if err != nil {
		return nil, err
	}
	sel = w.Spec.Selector.MatchLabels
	if len(sel) == 0 {
		return nil, &provider.Error{Op: op, Reason: provider.ReasonBadConfig,
			Err:  fmt.Errorf("home %s: %s %s/%s selects its pods with expressions only", id, o.Kind, o.Namespace, o.Name),
			Hint: "give the workload a spec.selector.matchLabels"}
	}
	p.mu.Lock()
	p.selectors[key] = sel
	p.mu.Unlock()
	return sel, nil
}

// homePods are the pods of the home among pods: the Pod home's pod, or
// the pods the workload's selector matches; those being deleted only when
// deleting is true.
func homePods(pods map[string]*kapi.Pod, o HomeOptions, sel map[string]string, deleting bool) []*kapi.Pod {
	var out []*kapi.Pod
	if o.Kind == KindPod {
		if pod, ok := pods[o.Name]; ok && (deleting || !pod.Deleting()) {
			out = append(out, pod)
		}
		return out
	}
	for _, pod := range pods {
		if (deleting || !pod.Deleting()) && matches(pod.Metadata.Labels, sel) {
			out = append(out, pod)
		}
	}
	return out
}

// byPreference orders pods as the home's traffic should prefer them: pod
// ref (the one the last wake returned) first, then the newest (a rolling
// update's new pod before the old one it replaces).
func byPreference(pods []*kapi.Pod, ref string) []*kapi.Pod {
	slices.SortStableFunc(pods, func(a, b *kapi.Pod) int {
		if (a.Metadata.Name == ref) != (b.Metadata.Name == ref) {
			if a.Metadata.Name == ref {
				return -1
			}
			return 1
		}
		if c := strings.Compare(b.Metadata.CreationTimestamp, a.Metadata.CreationTimestamp); c != 0 {
			return c
		}
		return strings.Compare(a.Metadata.Name, b.Metadata.Name)
	})
	return pods
}

func matches(labels, sel map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// fence returns the annotations of a write over w: this gateway as the
// owner, and the generation one above the one w carries.
func (p *Provider) fence(w *kapi.Workload) map[string]string {
	gen, _ := strconv.ParseInt(w.Metadata.Annotations[AnnotationGeneration], 10, 64)
	return map[string]string{AnnotationOwner: p.cfg.Owner, AnnotationGeneration: strconv.FormatInt(gen+1, 10)}
}

// scale sets the workload's replicas to n through its scale subresource,
// fenced: the workload is read, a claim (the fence annotations, with
// wakegate.io/replicas n) written with the resourceVersion read as a
// precondition, and the scale written with the resourceVersion that claim
// produced, so that any write between the read and the scale (another
// gateway's) makes it 409 Conflict; a conflict is tried again on a fresh
// read. A claim for n that is there already (another writer's, whose
// scale has not landed) is not made again: the scale carries the
// resourceVersion read. wrote is false when the replicas were n already.
func (p *Provider) scale(ctx context.Context, op, id string, o HomeOptions, n int32) (wrote bool, err error) {
	res := resource(o)
	want := strconv.Itoa(int(n))
	for range conflictTries {
		w, err := p.getWorkload(ctx, op, id, o)
		if err != nil {
			return false, err
		}
		if w.Spec.Replicas != nil && *w.Spec.Replicas == n {
			return false, nil
		}
		rv, gen := w.Metadata.ResourceVersion, w.Metadata.Annotations[AnnotationGeneration]
		if w.Metadata.Annotations[AnnotationReplicas] != want {
			ann := p.fence(w)
			ann[AnnotationReplicas] = want
			patch := map[string]any{"metadata": map[string]any{"resourceVersion": rv, "annotations": ann}}
			var claimed kapi.Workload
			err = p.client.Do(ctx, http.MethodPatch, workloadPath(o), kapi.MergePatch, patch, &claimed)
			if kapi.IsConflict(err) {
				continue
			}
			if err != nil {
				return false, p.apiError(op, id, call{"patch", res, o.Namespace, o.Name}, err)
			}
			rv, gen = claimed.Metadata.ResourceVersion, ann[AnnotationGeneration]
		}
		sc := kapi.Scale{APIVersion: "autoscaling/v1", Kind: "Scale",
			Metadata: kapi.Meta{Name: o.Name, Namespace: o.Namespace, ResourceVersion: rv}}
		sc.Spec.Replicas = n
		err = p.client.Do(ctx, http.MethodPut, workloadPath(o)+"/scale", "", sc, nil)
		if kapi.IsConflict(err) {
			continue
		}
		if err != nil {
			return false, p.apiError(op, id, call{"update", res + "/scale", o.Namespace, o.Name}, err)
		}
		p.log.Info("kubernetes: scaled", "home", id, "kind", o.Kind, "namespace", o.Namespace, "name", o.Name,
			"replicas", n, "generation", gen)
		return true, nil
	}
	return false, p.apiError(op, id, call{"update", res + "/scale", o.Namespace, o.Name},
		&kapi.StatusError{Code: http.StatusConflict, Reason: "Conflict", Message: "still conflicting after fresh reads"})
}

// setImage sets the workload's container to img and 1 replica, with the
// version annotation on the workload and its pod template, fenced as
// scale is, in one strategic merge patch.
func (p *Provider) setImage(ctx context.Context, s provider.Spec, o HomeOptions, img string) error {
	res := resource(o)
	for range conflictTries {
		w, err := p.getWorkload(ctx, "recreate", s.ID, o)
		if err != nil {
			return err
		}
		c := containerOf(w.Spec.Template.Spec.Containers, o.Container)
		if c.Name == "" {
			return &provider.Error{Op: "recreate", Reason: provider.ReasonBadConfig,
				Err:  fmt.Errorf("home %s: %s %s/%s has no container %q", s.ID, o.Kind, o.Namespace, o.Name, o.Container),
				Hint: "set options.container to one of the pod template's containers"}
		}
		ann := p.fence(w)
		ann[AnnotationReplicas], ann[AnnotationVersion] = "1", s.Version
		patch := map[string]any{
			"metadata": map[string]any{"resourceVersion": w.Metadata.ResourceVersion, "annotations": ann},
			"spec": map[string]any{"replicas": 1, "template": map[string]any{
				"metadata": map[string]any{"annotations": map[string]string{AnnotationVersion: s.Version}},
				"spec":     map[string]any{"containers": []map[string]string{{"name": c.Name, "image": img}}},
			}},
		}
		err = p.client.Do(ctx, http.MethodPatch, workloadPath(o), kapi.StrategicPatch, patch, nil)
		if kapi.IsConflict(err) {
			continue
		}
		if err != nil {
			return p.apiError("recreate", s.ID, call{"patch", res, o.Namespace, o.Name}, err)
		}
		p.log.Info("kubernetes: image set", "home", s.ID, "kind", o.Kind, "namespace", o.Namespace, "name", o.Name,
			"container", c.Name, "image", img, "generation", ann[AnnotationGeneration])
		return nil
	}
	return p.apiError("recreate", s.ID, call{"patch", res, o.Namespace, o.Name},
		&kapi.StatusError{Code: http.StatusConflict, Reason: "Conflict", Message: "still conflicting after fresh reads"})
}

// containerOf returns the container named name ("": the first), or a
// zero Container.
func containerOf(cs []kapi.Container, name string) kapi.Container {
	for _, c := range cs {
		if name == "" || c.Name == name {
			return c
		}
	}
	return kapi.Container{}
}

// problem says why pod cannot serve for good (an image it cannot pull, a
// container that keeps crashing or cannot be made, a failed pod), as a
// *provider.Error naming the pod, the container and the image; nil when
// nothing says so.
func problem(pod *kapi.Pod) *provider.Error {
	name := pod.Metadata.Namespace + "/" + pod.Metadata.Name
	for _, cs := range pod.Status.ContainerStatuses {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
			return &provider.Error{Reason: ReasonImagePull,
				Err: fmt.Errorf("pod %s: container %s: %s: %s", name, cs.Name, w.Reason, w.Message),
				Hint: fmt.Sprintf("the cluster cannot pull image %s for container %s of pod %s (%s): "+
					"check the image name and tag, the registry and the pod's imagePullSecrets", imageOf(pod, cs), cs.Name, name, w.Reason)}
		case "CrashLoopBackOff":
			return &provider.Error{Reason: ReasonCrashLoop,
				Err:  fmt.Errorf("pod %s: container %s: %s: %s", name, cs.Name, w.Reason, w.Message),
				Hint: fmt.Sprintf("container %s of pod %s keeps exiting (%s): read its logs", cs.Name, name, lastExit(cs))}
		case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
			return &provider.Error{Reason: provider.ReasonBadConfig,
				Err:  fmt.Errorf("pod %s: container %s: %s: %s", name, cs.Name, w.Reason, w.Message),
				Hint: fmt.Sprintf("container %s of pod %s cannot be made: %s", cs.Name, name, w.Message)}
		}
	}
	if pod.Status.Phase == "Failed" {
		return &provider.Error{Reason: provider.ReasonUnavailable,
			Err:  fmt.Errorf("pod %s failed: %s: %s", name, pod.Status.Reason, pod.Status.Message),
			Hint: fmt.Sprintf("pod %s failed (%s %s)", name, pod.Status.Reason, pod.Status.Message)}
	}
	return nil
}

// imageOf is container cs's image: the spec's (the status may name the
// image by digest, or not at all before a pull).
func imageOf(pod *kapi.Pod, cs kapi.ContainerStatus) string {
	if c := containerOf(pod.Spec.Containers, cs.Name); c.Image != "" {
		return c.Image
	}
	return cs.Image
}

// lastExit says how container cs ended last: its exit code and reason
// (OOMKilled, Error), and its restarts.
func lastExit(cs kapi.ContainerStatus) string {
	t := cs.LastState.Terminated
	if t == nil {
		return fmt.Sprintf("%d restarts", cs.RestartCount)
	}
	return fmt.Sprintf("exit code %d, %s, %d restarts", t.ExitCode, t.Reason, cs.RestartCount)
}
