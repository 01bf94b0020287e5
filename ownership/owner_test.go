package ownership

import "testing"

func TestMachineOnlyEndpoints(t *testing.T) {
	for ep, want := range map[string]bool{
		"http://127.0.0.1:40123":       true,
		"http://[::1]:40123":           true,
		"http://localhost:8080":        true,
		"unix:///srv/homes/h1/.sock":   true,
		"http://10.0.0.7:40123":        false,
		"https://h1.internal:443":      false,
		"http://home-h1.example.org/x": false,
	} {
		if got := MachineOnly(ep); got != want {
			t.Errorf("MachineOnly(%q) = %v, want %v", ep, got, want)
		}
	}
}
