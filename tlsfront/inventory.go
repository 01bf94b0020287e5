package tlsfront

import (
	"crypto/x509"
	"sort"
	"sync"
	"time"
)

// maxTracked bounds the names the inventory remembers (on-demand names
// come and go); past it, the oldest events are forgotten first.
const maxTracked = 1000

// CertInfo describes one certificate name the front door serves or tries
// to (GET /admin/certificates).
type CertInfo struct {
	// Name is the host name.
	Name string `json:"name"`
	// Status is "valid", "expired", "pending" (none yet) or "failed" (the
	// last attempt failed and none is served).
	Status string `json:"status"`
	// Names are the certificate's subject names.
	Names []string `json:"names,omitempty"`
	// NotAfter is when the served certificate expires.
	NotAfter time.Time `json:"not_after,omitzero"`
	// Issuer is the issuing CA's name.
	Issuer string `json:"issuer,omitempty"`
	// LastEvent and LastEventAt are the last obtained or failed event.
	LastEvent   string    `json:"last_event,omitempty"`
	LastEventAt time.Time `json:"last_event_at,omitzero"`
	// LastError is the last failure's cause (for operators).
	LastError string `json:"last_error,omitempty"`
}

// inventory remembers the names the front door manages and their last
// events.
type inventory struct {
	mu    sync.Mutex
	names map[string]*CertInfo
}

func newInventory(names []string) *inventory {
	inv := &inventory{names: map[string]*CertInfo{}}
	for _, n := range names {
		inv.names[n] = &CertInfo{Name: n}
	}
	return inv
}

func (inv *inventory) record(ev Event) {
	if ev.Identifier == "" {
		return
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	ci, ok := inv.names[ev.Identifier]
	if !ok {
		if len(inv.names) >= maxTracked {
			inv.evictOldest()
		}
		ci = &CertInfo{Name: ev.Identifier}
		inv.names[ev.Identifier] = ci
	}
	ci.LastEvent, ci.LastEventAt, ci.LastError = ev.Name, time.Now(), ""
	if ev.Err != nil {
		ci.LastError = ev.Err.Error()
	}
}

func (inv *inventory) evictOldest() {
	var oldest string
	var at time.Time
	for n, ci := range inv.names {
		if oldest == "" || ci.LastEventAt.Before(at) {
			oldest, at = n, ci.LastEventAt
		}
	}
	delete(inv.names, oldest)
}

// Certificates lists the names the front door manages, with the
// certificate served for each, sorted by name. In the files mode it is the
// one certificate of the files.
func (f *Front) Certificates() []CertInfo {
	if f.files != nil {
		c, _ := f.files.get()
		ci := CertInfo{Name: "files", Status: "valid"}
		if c != nil && c.Leaf != nil {
			ci = describe(ci, c.Leaf)
			if len(c.Leaf.DNSNames) > 0 {
				ci.Name = c.Leaf.DNSNames[0]
			}
		}
		return []CertInfo{ci}
	}
	f.inv.mu.Lock()
	out := make([]CertInfo, 0, len(f.inv.names))
	for _, ci := range f.inv.names {
		out = append(out, *ci)
	}
	f.inv.mu.Unlock()
	for i := range out {
		out[i].Status = "pending"
		if out[i].LastEvent == "cert_failed" {
			out[i].Status = "failed"
		}
		if f.cache == nil {
			continue
		}
		for _, c := range f.cache.AllMatchingCertificates(out[i].Name) {
			if c.Leaf != nil && c.Leaf.NotAfter.After(out[i].NotAfter) {
				out[i] = describe(out[i], c.Leaf)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// describe fills ci from the served leaf.
func describe(ci CertInfo, leaf *x509.Certificate) CertInfo {
	ci.Names, ci.NotAfter, ci.Issuer = leaf.DNSNames, leaf.NotAfter, leaf.Issuer.CommonName
	ci.Status = "valid"
	if time.Now().After(leaf.NotAfter) {
		ci.Status = "expired"
	}
	return ci
}
