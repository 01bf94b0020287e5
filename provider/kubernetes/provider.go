package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/kubernetes/kapi"
)

// Name is the provider's config name.
const Name = "kubernetes"

// Annotations the provider keeps on what it writes.
const (
	// AnnotationOwner names the gateway that wrote a workload's replicas
	// or image last (Config.Owner).
	AnnotationOwner = "wakegate.io/owner"
	// AnnotationGeneration counts the provider's writes of a workload:
	// each write sets it one above the value it read, together with the
	// resourceVersion it read, so a writer that read an older state gets
	// 409 Conflict instead of overwriting (DESIGN rule 15).
	AnnotationGeneration = "wakegate.io/generation"
	// AnnotationReplicas is the replicas the last write asked for.
	AnnotationReplicas = "wakegate.io/replicas"
	// AnnotationVersion is the version a roll set.
	AnnotationVersion = "wakegate.io/version"
	// LabelHome is the label of a Pod home's pod: the home's id.
	LabelHome = "wakegate.io/home"
)

// Provider runs homes as workloads of a Kubernetes cluster.
type Provider struct {
	cfg       Config
	client    *kapi.Client
	cfgSource string
	log       *slog.Logger
	http      *http.Client

	ctx    context.Context // ends at Close: the watches' owner
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	caches    map[string]*podCache         // namespace -> its pods
	selectors map[string]map[string]string // workload key -> its pods' labels
}

// New builds the provider on c: it reads the kubeconfig (or the pod's
// service account) but calls the API server only when a home needs it.
func New(c Config, log *slog.Logger) (*Provider, error) {
	c.Defaults()
	var kc kapi.Config
	var err error
	if c.Kubeconfig != "" {
		kc, err = kapi.LoadKubeconfig(c.Kubeconfig, c.Context)
	} else {
		kc, err = kapi.InCluster(kapi.ServiceAccountDir)
	}
	if err != nil {
		return nil, err
	}
	cl, err := kapi.New(kc)
	if err != nil {
		return nil, err
	}
	if c.Namespace == "" {
		c.Namespace = kc.Namespace
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	if c.Owner == "" {
		c.Owner, _ = os.Hostname()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Provider{cfg: c, client: cl, cfgSource: kc.Source, log: log,
		http: provider.HomeClient(&http.Client{Timeout: 10 * time.Second}),
		ctx:  ctx, cancel: cancel,
		caches: map[string]*podCache{}, selectors: map[string]map[string]string{}}, nil
}

// Name returns "kubernetes".
func (p *Provider) Name() string { return Name }

// Close ends the watches.
func (p *Provider) Close() error {
	p.cancel()
	p.wg.Wait()
	return nil
}

// home decodes and fills s's options.
func (p *Provider) home(s provider.Spec) (HomeOptions, error) {
	var o HomeOptions
	if err := provider.DecodeOptions(s.Options, &o); err != nil {
		return o, &provider.Error{Reason: provider.ReasonBadConfig, Err: fmt.Errorf("home %s: %w", s.ID, err)}
	}
	o.fill(s.ID, p.cfg.Namespace)
	return o, nil
}

// pods returns the watched pods of namespace ns, starting its watch on
// first use.
func (p *Provider) pods(ns string) *podCache {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc, ok := p.caches[ns]
	if !ok {
		pc = newPodCache(p.client, ns, p.log)
		p.caches[ns] = pc
		p.wg.Go(func() { pc.run(p.ctx) })
	}
	return pc
}

// Wake scales a Deployment or StatefulSet to 1, or creates a Pod home's
// pod, and returns once a pod of the home has an IP: the Ready condition
// is the health step's (Health), the gateway's probe decides last.
func (p *Provider) Wake(ctx context.Context, s provider.Spec) (provider.Result, error) {
	o, err := p.home(s)
	if err != nil {
		return provider.Result{}, err
	}
	was := false
	if o.Kind == KindPod {
		was, err = p.ensurePod(ctx, "wake", s, o)
	} else {
		var wrote bool
		wrote, err = p.scale(ctx, "wake", s.ID, o, 1)
		if err == nil && !wrote {
			// The replicas were 1 already: running, or another
			// gateway's scale-up still starting.
			r, serr := p.Status(ctx, s)
			was = serr == nil && r.State == provider.StateRunning
		}
	}
	if err != nil {
		return provider.Result{}, err
	}
	res, err := p.waitServing(ctx, "wake", s, o, "")
	if err != nil {
		return provider.Result{}, err
	}
	res.WasRunning = was
	return res, nil
}

// Suspend is unsupported: a pod is stopped, never paused.
func (p *Provider) Suspend(context.Context, provider.Spec) error { return provider.ErrUnsupported }

// Stop scales the workload to 0 or deletes the Pod home's pod, then waits
// (up to stop_timeout) until no pod of the home is left: only then is the
// stop proven.
func (p *Provider) Stop(ctx context.Context, s provider.Spec) (bool, error) {
	o, err := p.home(s)
	if err != nil {
		return false, err
	}
	if o.Kind == KindPod {
		err = p.deletePod(ctx, "stop", s.ID, o)
	} else if _, err = p.scale(ctx, "stop", s.ID, o, 0); isNotFound(err) {
		// The workload is gone (a discovered home's Deployment was
		// deleted): nothing to scale; its pods, if any are left, go
		// with it.
		err = nil
	}
	if err != nil {
		return false, err
	}
	return p.waitGone(ctx, s.ID, o)
}

// isNotFound reports whether err is the provider's not_found.
func isNotFound(err error) bool {
	pe, ok := provider.AsError(err)
	return ok && pe.Reason == provider.ReasonNotFound
}

// waitGone waits until no pod of the home is left, up to stop_timeout.
func (p *Provider) waitGone(ctx context.Context, id string, o HomeOptions) (bool, error) {
	wctx, cancel := context.WithTimeout(ctx, p.cfg.StopTimeout)
	defer cancel()
	sel, err := p.selector(wctx, "stop", id, o)
	if isNotFound(err) {
		return true, nil // no workload, and its selector never read: nothing of it to wait for
	}
	if err != nil {
		return false, err
	}
	err = p.pods(o.Namespace).await(wctx, func(pods map[string]*kapi.Pod) (bool, error) {
		return len(homePods(pods, o, sel, true)) == 0, nil
	})
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			p.log.Warn("kubernetes: a pod of the home is still there after the stop timeout", "home", id,
				"namespace", o.Namespace, "wait", p.cfg.StopTimeout.String())
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// Recreate moves the home onto s.Version: the workload's container gets
// the version's image (and the version annotation) and 1 replica, or the
// Pod home's pod is made again from its template; it returns once a pod
// of the new image has an IP.
func (p *Provider) Recreate(ctx context.Context, s provider.Spec) (provider.Result, error) {
	o, err := p.home(s)
	if err != nil {
		return provider.Result{}, err
	}
	img := p.image(s, o)
	if o.Kind == KindPod {
		if err := p.deletePod(ctx, "recreate", s.ID, o); err != nil {
			return provider.Result{}, err
		}
		if proven, err := p.waitGone(ctx, s.ID, o); err != nil || !proven {
			return provider.Result{}, errors.Join(err, fmt.Errorf("kubernetes recreate %s: the old pod is still there", s.ID))
		}
		if _, err := p.ensurePod(ctx, "recreate", s, o); err != nil {
			return provider.Result{}, err
		}
	} else {
		if img == "" {
			return provider.Result{}, &provider.Error{Op: "recreate", Reason: provider.ReasonBadConfig,
				Err:  fmt.Errorf("home %s: no image for version %s", s.ID, s.Version),
				Hint: "set the home's options.image (with {version}) or register the roll target with an image"}
		}
		if err := p.setImage(ctx, s, o, img); err != nil {
			return provider.Result{}, err
		}
	}
	return p.waitServing(ctx, "recreate", s, o, img)
}

// image is the image of s's version: the roll target's, else
// options.image with {version} replaced; "" when neither is set.
func (p *Provider) image(s provider.Spec, o HomeOptions) string {
	if s.Image != "" {
		return s.Image
	}
	return strings.NewReplacer("{version}", s.Version, "{id}", s.ID, "{target}", s.Target).Replace(o.Image)
}

// Version asks the running home for GET /version.
func (p *Provider) Version(ctx context.Context, s provider.Spec) (string, error) {
	r, err := p.Status(ctx, s)
	if err != nil {
		return "", err
	}
	if r.State != provider.StateRunning {
		return "", fmt.Errorf("kubernetes version %s: no pod of the home is ready", s.ID)
	}
	v, err := provider.AskVersion(ctx, p.http, r.Endpoint)
	if err != nil {
		return "", fmt.Errorf("kubernetes version %s: %w", s.ID, err)
	}
	return v, nil
}

// Status reports from the watched pods: running (a Ready pod with an IP,
// and its endpoint), failed (a pod whose container cannot pull its image
// or keeps crashing, with the reason), stopped (no pod), or unknown (a pod
// that is starting or going).
func (p *Provider) Status(ctx context.Context, s provider.Spec) (provider.Result, error) {
	o, err := p.home(s)
	if err != nil {
		return provider.Result{}, err
	}
	sel, err := p.selector(ctx, "status", s.ID, o)
	if err != nil {
		if pe, ok := provider.AsError(err); ok && pe.Reason == provider.ReasonNotFound {
			return provider.Result{State: provider.StateFailed, Reason: pe.Hint}, nil
		}
		return provider.Result{}, err
	}
	var res provider.Result
	err = p.pods(o.Namespace).snapshot(ctx, func(pods map[string]*kapi.Pod) {
		live := byPreference(homePods(pods, o, sel, false), s.Ref)
		res.State = provider.StateStopped
		if len(live) > 0 {
			res.State = provider.StateUnknown
		}
		for _, pod := range live {
			if why := problem(pod); why != nil {
				res.State, res.Reason = provider.StateFailed, why.Hint
				continue
			}
			if pod.Ready() && pod.Status.PodIP != "" {
				res = provider.Result{State: provider.StateRunning, Endpoint: p.endpoint(o, pod), Ref: pod.Metadata.Name}
				return
			}
		}
	})
	return res, err
}

// endpoint is where the home's traffic goes when pod serves it.
func (p *Provider) endpoint(o HomeOptions, pod *kapi.Pod) string {
	if o.Forward == ForwardService {
		if o.Address != "" {
			return strings.TrimSuffix(o.Address, "/")
		}
		return fmt.Sprintf("http://%s.%s.svc:%d", o.Service, o.Namespace, o.ServicePort)
	}
	host := pod.Status.PodIP
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return "http://" + host + ":" + strconv.Itoa(o.Port)
}

// waitServing waits until a pod of the home (of image img, when not "")
// has an IP, and fails at once when a pod cannot pull its image or keeps
// crashing.
func (p *Provider) waitServing(ctx context.Context, op string, s provider.Spec, o HomeOptions, img string) (provider.Result, error) {
	sel, err := p.selector(ctx, op, s.ID, o)
	if err != nil {
		return provider.Result{}, err
	}
	var res provider.Result
	err = p.pods(o.Namespace).await(ctx, func(pods map[string]*kapi.Pod) (bool, error) {
		for _, pod := range byPreference(homePods(pods, o, sel, false), "") {
			if img != "" && containerOf(pod.Spec.Containers, o.Container).Image != img {
				continue
			}
			if why := problem(pod); why != nil {
				why.Op = op
				why.Err = fmt.Errorf("home %s: %w", s.ID, why.Err)
				return false, why
			}
			if pod.Status.PodIP != "" {
				res = provider.Result{State: provider.StateRunning, Endpoint: p.endpoint(o, pod), Ref: pod.Metadata.Name}
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("kubernetes %s %s: no pod of %s %s/%s got an address in time: %w",
			op, s.ID, o.Kind, o.Namespace, o.Name, err)
	}
	return res, err
}

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Closer   = (*Provider)(nil)
)
