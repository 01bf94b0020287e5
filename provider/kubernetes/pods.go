package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/kubernetes/kapi"
)

// ensurePod creates the Pod home's pod from its template, unless a pod of
// that name that is not being deleted is there already (was: it was), and
// waits out one that is being deleted first.
func (p *Provider) ensurePod(ctx context.Context, op string, s provider.Spec, o HomeOptions) (was bool, err error) {
	pc := p.pods(o.Namespace)
	err = pc.await(ctx, func(pods map[string]*kapi.Pod) (bool, error) {
		pod, ok := pods[o.Name]
		was = ok && !pod.Deleting()
		return !ok || was, nil
	})
	if err != nil || was {
		return was, err
	}
	img := p.image(s, o)
	repl := jsonReplacer("{version}", s.Version, "{image}", img, "{id}", s.ID, "{target}", s.Target)
	spec, err := podSpec(o.Pod, repl)
	if err != nil {
		return false, &provider.Error{Op: op, Reason: provider.ReasonBadConfig, Err: fmt.Errorf("home %s: options.pod: %w", s.ID, err)}
	}
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": o.Name, "namespace": o.Namespace,
			"labels":      map[string]string{LabelHome: s.ID},
			"annotations": map[string]string{AnnotationOwner: p.cfg.Owner, AnnotationVersion: s.Version}},
		"spec": json.RawMessage(spec),
	}
	err = p.client.Do(ctx, http.MethodPost, "/api/v1/namespaces/"+o.Namespace+"/pods", "", pod, nil)
	if kapi.Code(err) == http.StatusConflict {
		// Another gateway made it between the read and the create.
		return true, nil
	}
	if err != nil {
		return false, p.apiError(op, s.ID, call{"create", "pods", o.Namespace, o.Name}, err)
	}
	p.log.Info("kubernetes: pod created", "home", s.ID, "namespace", o.Namespace, "pod", o.Name)
	return false, nil
}

// deletePod deletes the Pod home's pod; one that is gone is deleted.
func (p *Provider) deletePod(ctx context.Context, op, id string, o HomeOptions) error {
	err := p.client.Do(ctx, http.MethodDelete, workloadPath(o), "", nil, nil)
	if err == nil || kapi.IsNotFound(err) {
		return nil
	}
	return p.apiError(op, id, call{"delete", "pods", o.Namespace, o.Name}, err)
}
