package edge

import "testing"

func BenchmarkCanonicalPath(b *testing.B) {
	for _, bc := range []struct{ name, in string }{
		{"clean", "/apps/demo/static/js/app.9f8e7d.js"},
		{"escaped", "/apps/demo/static/js/%61pp%20v2.9f8e7d.js"},
		{"dotdot", "/apps/demo/static/../js/./app.9f8e7d.js"},
		{"unicode", "/apps/demo/static/%E6%97%A5%E6%9C%AC/app.js"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := CanonicalPath(bc.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
