package probe

import (
	"net/http"
	"testing"
	"time"
)

// BenchmarkProbe measures one passing probe of each kind against a local
// server: a fresh connection, the request or upgrade, and the close.
func BenchmarkProbe(b *testing.B) {
	httpSrv, _ := probeTestHTTP(b, func(int64) int { return http.StatusOK })
	wsSrv, _, _ := probeTestWS(b, probeTestWSOptions{first: true})
	tcpAddr, _ := probeTestTCP(b)

	cases := []struct {
		name string
		spec Spec
	}{
		{"http", Spec{Kind: HTTP, Endpoint: httpSrv.URL, Path: probeTestPath, Header: probeTestRelay()}},
		{"ws-first-frame", Spec{Kind: WS, Endpoint: wsSrv.URL, Path: probeTestPath, Header: probeTestRelay(), Settle: time.Second}},
		{"tcp", Spec{Kind: TCP, Endpoint: tcpAddr}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ready := make(chan struct{})
			b.ReportAllocs()
			for b.Loop() {
				res, err := Run(b.Context(), c.spec, ready)
				if err != nil || res.Attempts != 1 {
					b.Fatalf("probe: %v (result %+v)", err, res)
				}
			}
		})
	}
}
